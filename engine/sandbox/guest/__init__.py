"""Programs that run *inside* the sandbox (standard library only, copied into each sandbox).

``bootstrap`` sets the limits and starts one of the roles: ``run`` a program, ``serve`` a candidate
function (``serve.py``) or ``judge`` it against trusted tests (``judge.py``). ``plain`` is the codec
for the values that cross between the candidate and the judge.
"""
