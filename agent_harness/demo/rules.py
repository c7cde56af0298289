"""The demo's scripted reviewer: the rules it approves or refuses the example agent's work by."""

from __future__ import annotations

import json
from typing import Any


def review_rules(body: Any) -> Any:
    """The scripted reviewer's judgement, from the request it is sent (OpenAI chat format).

    It reads the diff in the prompt like a careful person would for this project: the item
    that asks for ties in alphabetical order is refused while it leans on
    Counter.most_common, which keeps ties in first-seen order.
    """
    from agent_harness.testing.model_server import ScriptedCompletion

    messages = body.get("messages") if isinstance(body, dict) else None
    prompt = str(messages[-1].get("content", "")) if messages else ""
    added = [line for line in prompt.splitlines() if line.startswith("+")]
    if any("most_common(" in line for line in added):
        verdict = {
            "approved": False,
            "reasons": [
                "top_words returns Counter.most_common's order, which breaks ties by first "
                "appearance; the item asks for ties in alphabetical order"
            ],
            "permanent": False,
        }
    else:
        verdict = {
            "approved": True,
            "reasons": ["the change does what the item asks and its checks pass"],
            "permanent": False,
        }
    return ScriptedCompletion(
        text=json.dumps(verdict), input_tokens=len(prompt) // 4, output_tokens=40
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m agent_harness.demo.rules [--port N]`: the demo's reviewer on loopback."""
    import argparse

    from agent_harness.testing.model_server import ScriptedResponder, serve

    parser = argparse.ArgumentParser(
        prog="python -m agent_harness.demo.rules",
        description="The demo's scripted reviewer for the tally example, on 127.0.0.1, speaking "
        "the OpenAI and Anthropic wire formats (OPENAI_BASE_URL=http://127.0.0.1:PORT/v1).",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    args = parser.parse_args(argv)
    serve(ScriptedResponder(review_rules), args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
