"""Files hpml-lab writes for a person to read and perhaps edit (the job scripts of `hpml-lab slurm`, the
README's task table of `hpml-lab tasks --markdown`): each carries a checksum of what hpml-lab wrote, so that
writing it again replaces only what is still hpml-lab's own. An edited copy (or a file hpml-lab never wrote)
is refused in one line; with --force it is kept beside the new one, and the line says where.

    text = written.signed(body, "# ")                    # body + a last line '# ... checksum sha256 ...'
    written.replace(path, text, "# ", force=False, how="...")   # ConfigError if the file there was edited
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from ..config import ConfigError
from ..io import atomic_write_text, own_target, plain_target

_SIGNATURE = re.compile(r"checksum (?:sha256 )?([0-9a-z]{12})\b")


def digest(text: str) -> str:
    """The sha256 of `text`, its first 12 base-32 characters: what a file's signature line records (not hex,
    so that no reader takes it for a commit)."""
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().lower()[:12]


def matches(recorded: str | None, text: str) -> bool:
    """Whether a recorded checksum is that of `text`: this digest, or the 12 hex digits files written before
    it carry."""
    return recorded is not None and recorded in (digest(text), hashlib.sha256(text.encode()).hexdigest()[:12])


def signature_line(body: str, comment: str = "# ", end: str = "") -> str:
    return (
        f"{comment}written by hpml-lab; an edited copy is never replaced without a word: "
        f"checksum sha256 {digest(body)}{end}"
    )


def signed(body: str, comment: str = "# ") -> str:
    """`body` (ending with a newline) and its signature as the last line."""
    body = body if body.endswith("\n") else body + "\n"
    return body + signature_line(body, comment) + "\n"


def unedited(text: str) -> bool:
    """True if `text` is what hpml-lab signed: its last line's checksum is that of the lines above it."""
    lines = text.rstrip("\n").split("\n")
    m = _SIGNATURE.search(lines[-1]) if lines else None
    return bool(m) and matches(m.group(1), "\n".join(lines[:-1]) + "\n")


def kept_copy(path: Path) -> Path:
    """A free name beside `path` for the user's edited copy: NAME.edited, NAME.edited-2, ..."""
    candidate, n = path.with_name(path.name + ".edited"), 1
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.edited-{n}")
    return candidate


def replace(path: Path, text: str, force: bool, how: str, follow_links: bool = False) -> str:
    """Write `text` to `path` unless the file there was edited (or not written by hpml-lab): then a
    ConfigError saying so (nothing written), or with `force` the file is first kept as NAME.edited. Returns
    what to tell the user ('' when nothing of theirs was kept). `how`: what else they may do, for the
    refusal."""
    path = Path(path)
    target = plain_target(path) if follow_links else own_target(path)  # a device or a planted link: one line
    if not target.is_file():
        atomic_write_text(path, text, follow_links=follow_links)
        return ""
    try:
        old = target.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} exists and cannot be read ({e}); nothing written") from None
    if old == text or unedited(old):
        atomic_write_text(path, text, follow_links=follow_links)
        return ""
    if not force:
        raise ConfigError(
            f"{path} was changed since hpml-lab wrote it (or hpml-lab did not write it): nothing written; "
            f"{how}, or add --force to replace it (your file is then kept as {kept_copy(path).name})"
        )
    copy = kept_copy(path)
    atomic_write_text(copy, old)
    atomic_write_text(path, text, follow_links=follow_links)
    return f"your edited {path.name} is kept as {copy}"
