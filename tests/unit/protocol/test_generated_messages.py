"""protocol/messages.py is exactly what the generator makes from the project's copy of Kafka's
message definitions (protocol/message_definitions)."""

from __future__ import annotations

from pathlib import Path

from protocol.generate import DEFINITIONS
from protocol.generate import main as generate

ROOT = Path(__file__).resolve().parents[3]


def test_generated_module_is_up_to_date(tmp_path):
    out = tmp_path / "messages.py"
    generate([str(DEFINITIONS), str(out)])
    assert out.read_text() == (ROOT / "protocol" / "messages.py").read_text()
