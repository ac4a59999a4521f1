"""CoMLRL 1.4.3's public modules over CoopLab: replacing ``comlrl`` by ``engine.comlrl`` in a CoMLRL
script's imports is the whole port.

The tree mirrors CoMLRL's (``trainers.reinforce``, ``trainers.actor_critic``, ``trainers.preference``,
``utils``, ``schedulers``). Its trainers take CoMLRL's constructors, check them in CoMLRL's order with
CoMLRL's messages, show CoMLRL's attributes (``agents`` are the models, ``optimizers``,
``tokenizers``, ``reference_models``, ...) and train with CoopLab's trainers
(:mod:`engine.comlrl._wrap`). CoopLab's own API (``engine.MAGRPOTrainer`` ...) stays beside it. What
differs on purpose, and why, is the table of docs/comlrl.md; CoMLRL 1.4.3's own test suite checks the
rest (``make conformance``).
"""

__version__ = "1.4.3"
