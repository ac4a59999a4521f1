"""The judge's side: run trusted tests against a candidate function that lives in another process.

The tests (``support`` code such as helpers the problem defines, a ``preamble``, then ``steps``)
run here, in a namespace the candidate never touches. ``candidate(...)`` is a proxy: its arguments
go to the candidate process as plain values, and only a plain value (exact built-in types) comes
back, so no object the candidate built ever reaches ``==`` or ``assert`` here. After the candidate
is defined and after every step, the judge writes its tally as one JSON line on the verdict
channel, which only this process holds; the last complete line is the verdict.
"""

import builtins
import json
import os
import select
import signal
import time

import plain

# Exceptions a candidate's call may re-raise here by name (tests sometimes expect one). Never the
# iteration signals: StopIteration raised inside map() or a generator would end a loop of checks early.
_MIRRORED = frozenset(
    name for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), Exception)
    and not issubclass(getattr(builtins, name), (StopIteration, StopAsyncIteration))
)
_GRACE_S = 0.5


class CandidateError(Exception):
    """The candidate's call failed: it raised, returned non-plain data, or stopped answering."""


class _StepTimeout(BaseException):
    """A test step (tests and calls together) exceeded its time limit."""


class Channel:
    """Request/answer lines to the candidate, with deadlines and a size cap on answers."""

    def __init__(self, requests_fd, answers_fd, limit):
        self.requests = os.fdopen(requests_fd, "wb")
        self.answers_fd = answers_fd
        self.limit = limit
        self.buffer = b""
        self.broken = ""

    def send(self, message):
        try:
            self.requests.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
            self.requests.flush()
        except (BrokenPipeError, OSError):
            self.broken = "the candidate process has exited"
            raise CandidateError(self.broken) from None

    def receive(self, deadline):
        """The next answer line as a message dict; marks the channel broken on EOF, garbage or time."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > self.limit:
                self.broken = f"the candidate sent an answer larger than {self.limit} bytes"
                raise CandidateError(self.broken)
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.answers_fd], [], [], max(0.0, remaining))
            if not ready:
                self.broken = "the candidate did not answer within the time limit"
                raise CandidateError(self.broken)
            chunk = os.read(self.answers_fd, 65536)
            if not chunk:
                self.broken = "the candidate process has exited"
                raise CandidateError(self.broken)
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return plain.decode_message(line)
        except plain.NotPlain as exc:
            self.broken = f"the candidate sent a malformed answer ({exc})"
            raise CandidateError(self.broken) from None


class Candidate:
    """Calls the candidate's function in its own process; returns plain values only."""

    def __init__(self, channel, name):
        self.channel = channel
        self.name = name
        self.calls = 0
        self.step_deadline = time.monotonic()

    def __call__(self, *args, **kwargs):
        if self.channel.broken:
            raise CandidateError(self.channel.broken)
        self.calls += 1
        call_id = self.calls
        remaining = max(0.001, self.step_deadline - time.monotonic())
        try:
            message = {"id": call_id, "args": plain.to_json(args), "kwargs": plain.to_json(kwargs),
                       "timeout": remaining}
        except plain.NotPlain as exc:
            raise CandidateError(f"an argument is not plain data: {exc}") from None
        self.channel.send(message)
        deadline = time.monotonic() + remaining + _GRACE_S
        while True:
            answer = self.channel.receive(deadline)
            if type(answer.get("id")) is int and answer["id"] == call_id:
                break  # answers to earlier, abandoned calls are skipped
        if "value" in answer:
            try:
                return plain.from_json(answer["value"])
            except plain.NotPlain as exc:
                raise CandidateError(f"{self.name} returned {exc}") from None
        if "unplain" in answer:
            raise CandidateError(f"{self.name} returned {str(answer['unplain'])[:300]}")
        name, text = str(answer.get("raised", "")), str(answer.get("message", ""))[:400]
        if name in _MIRRORED:
            raise getattr(builtins, name)(text)
        raise CandidateError(text or f"{self.name} failed")


def _on_alarm(signum, frame):
    raise _StepTimeout()


def _failure(source, exc):
    head = (source.splitlines() or [""])[0][:200]
    text = "test step timed out" if isinstance(exc, _StepTimeout) else (
        type(exc).__name__ + (": " + str(exc)[:300] if str(exc) else ""))
    return f"{head}  ->  {text}"


def main(cfg):
    with open(os.path.join(cfg["box"], "tests.json"), encoding="utf-8") as fh:
        tests = json.load(fh)
    verdict = os.fdopen(cfg["verdict_fd"], "w", encoding="utf-8")
    tally = {"defined": False, "passed": 0, "steps_done": 0, "first_failure": "", "error": ""}

    def report():
        verdict.write(json.dumps(tally) + "\n")
        verdict.flush()

    step_timeout = float(tests["step_timeout"])
    channel = Channel(cfg["requests_fd"], cfg["answers_fd"], int(cfg["max_message_bytes"]))
    try:
        ready = channel.receive(time.monotonic() + step_timeout + _GRACE_S)
        tally["defined"] = ready.get("ready") is True
        if not tally["defined"]:
            tally["error"] = str(ready.get("error", "the candidate did not start"))[:400]
    except CandidateError as exc:
        tally["error"] = str(exc)
    report()
    if not tally["defined"]:
        return
    entry = tests["entry_point"]
    candidate = Candidate(channel, entry)
    namespace = {"__name__": "__judge__", "__builtins__": builtins}
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        exec(compile(tests["support"], "support.py", "exec"), namespace)
        exec(compile(tests["preamble"], "tests.py", "exec"), namespace)
    except BaseException as exc:
        tally["error"] = "the tests' setup failed: " + type(exc).__name__
    namespace["candidate"] = namespace[entry] = candidate
    for kind, source in tests["steps"]:
        candidate.step_deadline = time.monotonic() + step_timeout
        try:
            signal.setitimer(signal.ITIMER_REAL, step_timeout + 2 * _GRACE_S)
            exec(compile(source, "tests.py", "exec"), namespace)
            signal.setitimer(signal.ITIMER_REAL, 0)
            if kind == "test":
                tally["passed"] += 1
        except BaseException as exc:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if not tally["first_failure"]:
                tally["first_failure"] = _failure(source, exc)
            if kind == "setup":
                tally["steps_done"] += 1
                report()
                break  # later checks depend on the setup
        tally["steps_done"] += 1
        report()
    channel.requests.close()
