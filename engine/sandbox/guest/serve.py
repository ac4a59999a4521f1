"""The candidate's side: define the program, then answer calls of its function with plain values.

Requests arrive one JSON line each on the request pipe (``{"id", "args", "kwargs", "timeout"}``);
each answer is one JSON line on the answer pipe: ``{"id", "value"}``, ``{"id", "raised",
"message"}`` or ``{"id", "unplain"}``. Everything in this process belongs to the candidate: it may
rewrite any of it, which is why the judge trusts nothing it says beyond plain values.
"""

import json
import os
import signal

import plain


def _on_alarm(signum, frame):
    raise TimeoutError("the call exceeded its time limit")


def _describe(exc):
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__
        text = ""
    return (type(exc).__name__ + (": " + text[:300] if text else ""))[:400]


def main(cfg):
    requests = os.fdopen(cfg["requests_fd"], "rb")
    answers = os.fdopen(cfg["answers_fd"], "wb")
    limit = int(cfg["max_message_bytes"])

    def send(message):
        text = json.dumps(message, separators=(",", ":"))
        if len(text) > limit:
            text = json.dumps({"id": message.get("id"), "unplain": f"the answer is larger than {limit} bytes"})
        answers.write(text.encode("utf-8") + b"\n")
        answers.flush()

    signal.signal(signal.SIGALRM, _on_alarm)
    namespace = {"__name__": "__candidate__", "__builtins__": __builtins__}
    try:
        signal.setitimer(signal.ITIMER_REAL, float(cfg["define_timeout"]))
        with open(os.path.join(cfg["box"], "main.py"), encoding="utf-8") as fh:
            exec(compile(fh.read(), "solution.py", "exec"), namespace)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        send({"ready": False, "error": _describe(exc)})
        return
    function = namespace.get(cfg["entry_point"])
    if not callable(function):
        send({"ready": False, "error": f"the program does not define {cfg['entry_point']}"})
        return
    send({"ready": True})
    for line in requests:
        call = plain.decode_message(line)
        answer = {"id": call["id"]}
        try:
            args, kwargs = plain.from_json(call["args"]), plain.from_json(call["kwargs"])
            signal.setitimer(signal.ITIMER_REAL, max(0.001, float(call["timeout"])))
            value = function(*args, **kwargs)
            signal.setitimer(signal.ITIMER_REAL, 0)
            answer["value"] = plain.to_json(value)
        except plain.NotPlain as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            answer["unplain"] = str(exc)
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            answer["raised"], answer["message"] = type(exc).__name__[:100], _describe(exc)
        send(answer)
