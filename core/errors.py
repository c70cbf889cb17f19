"""The one exception that dhik raises for bad input (files, user data).

Every message has the shape ``"<file>: <json path>: <problem>"``, e.g.
``skeleton.json: joints[3].axis: must be a non-zero 3-vector``; without a JSON
path it is ``"<file>: <problem>"``. The CLI prints it after ``dhik: error:``
and the add-on shows it in Blender's status bar, so it must read well alone.
"""

from __future__ import annotations


class DhikError(ValueError):
    """Bad input: a file or value that dhik cannot use.

    Attributes: ``source`` (the file as the caller named it, or a label such as
    ``"input"``), ``path`` (JSON path inside it, ``""`` for the whole file) and
    ``problem`` (what is wrong). ``str(error)`` is the full one-line message.
    ``DhikError(message)`` alone serves errors that concern no file (CLI arguments):
    source and path are then empty. ``DhikError(source, problem)`` has no JSON path.
    """

    def __init__(self, source: object, path: str | None = None, problem: str | None = None):
        if problem is None:  # DhikError(message) or DhikError(source, problem)
            if path is None:
                source, path, problem = "", "", str(source)
            else:
                source, path, problem = source, "", path
        self.source = str(source)
        self.path = str(path)
        self.problem = str(problem)
        super().__init__(": ".join([p for p in (self.source, self.path) if p] + [self.problem]))

    @classmethod
    def at(cls, source: object, path: str, problem: str) -> DhikError:
        """Build the error for ``problem`` at JSON ``path`` of ``source`` (a path or label)."""
        return cls(str(source), path, problem)

    def __reduce__(self):  # keep pickling (multiprocessing) working with 3 arguments
        return (type(self), (self.source, self.path, self.problem))
