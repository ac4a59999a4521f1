"""Every trainer setting declared once (torch-free).

:mod:`engine.settings.catalog` holds each setting's name, type, default, bounds and description;
:mod:`engine.settings.rules` the rules that tie settings together; :mod:`engine.settings.derive`
builds the CoMLRL-compatible config classes (``MAGRPOConfig``, ``IACConfig``, ``MAACConfig``) and
the run-config ``TrainerSpec`` fields from them; :mod:`engine.settings.table` writes the docs'
settings table. Adding a setting is one entry in the catalog plus its use.
"""
