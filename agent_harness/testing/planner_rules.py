"""A scripted planner: inception's two questions answered by rules, over the real wire formats.

It reads the request as a model would (the first user message, in OpenAI's or Anthropic's
shape), finds which answer is asked for (`inception.scope/1` or `inception.tasks/1`) and the
context JSON, and answers deterministically from the paragraph:

- paths written in the paragraph (`tally/words.py`) are the files to change, or to protect
  when their sentence says to leave them alone; with none, `src/<word>.py` and a test;
- a sentence ending in `?` is a BLOCKING question (default: no); a missing test path asks an
  IMPORTANT question about the check; the labels are a NICE question;
- each sentence naming files becomes one item, in order, each depending on the one before,
  checked by `python -m unittest <the test module it names>`; answers are written into the
  item whose sentence shares most words with the question.

Feedback on a revision is added as a goal; feedback saying "not blocking" makes the planner
try to downgrade its BLOCKING questions (which the harness must refuse). Any other request
gets a reviewer's approval, so one server can plan and review.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_harness.inception.planner import SCOPE_FORMAT, TASKS_FORMAT
from agent_harness.testing.scripted_turns import ScriptedCompletion

_CONTEXT = re.compile(r"Context:\n```json\n(.*?)\n```", re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_EXTENSIONS = "py|md|toml|json|ya?ml|js|ts|tsx|txt|cfg|ini|rs|go|sh|html|css|sql|java|rb|c|h"
_PATHS = re.compile(
    rf"(?<![\w/.-])((?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.(?:{_EXTENSIONS}))(?![\w/])"
)
_PROTECT_WORDS = re.compile(
    r"\b(leave|alone|untouched|protect\w*|do not touch|don't touch)\b", re.I
)
_NEGATIVE = re.compile(r"\b(not|no|never|without)\b|n't\b", re.I)
_YES_NO = re.compile(r"^(should|does|do|is|are|can|must|will|may)\b", re.I)
_WORD = re.compile(r"[A-Za-z0-9]+")


def inception_rules(body: Any) -> ScriptedCompletion:
    """The scripted planner's answer to one request (a reviewer's approval for any other)."""
    prompt = _first_user_text(body)
    match = _CONTEXT.search(prompt)
    context = _loads(match.group(1)) if match else None
    if context is None or (SCOPE_FORMAT not in prompt and TASKS_FORMAT not in prompt):
        verdict = {"approved": True, "reasons": ["scripted planner: approves"], "permanent": False}
        return ScriptedCompletion(text=json.dumps(verdict))
    answer = scope_answer(context) if SCOPE_FORMAT in prompt else tasks_answer(context)
    text = json.dumps(answer, ensure_ascii=False)
    return ScriptedCompletion(
        text=text, input_tokens=len(prompt) // 4, output_tokens=len(text) // 4
    )


def scope_answer(context: dict[str, Any]) -> dict[str, Any]:
    paragraph = str(context.get("paragraph", ""))
    sentences = _sentences(paragraph)
    protect = _unique(p for s in sentences if _PROTECT_WORDS.search(s) for p in _PATHS.findall(s))
    change = [p for p in _unique(_PATHS.findall(paragraph)) if p not in protect]
    if not change:
        word = next((w.lower() for w in _WORD.findall(paragraph) if len(w) > 3), "feature")
        change = [f"src/{word}.py", f"tests/test_{word}.py"]
    plain = [s for s in sentences if not s.endswith("?") and not _PROTECT_WORDS.search(s)]
    goals = [s for s in plain if not _NEGATIVE.search(s)][:5] or [
        sentences[0] if sentences else "the work"
    ]
    feedback = " ".join(str(context.get("feedback") or "").split())
    if feedback:
        goals.append(f"Also, as the person asked: {feedback}")
    questions = _questions(sentences, change)
    if "not blocking" in feedback.lower():
        for question in questions:
            if question["grade"] == "BLOCKING":
                question["grade"] = "NICE"  # the planner tries; the harness must refuse it
    return {
        "objective": sentences[0] if sentences else "the work the paragraph describes",
        "goals": goals,
        "non_goals": [s for s in plain if _NEGATIVE.search(s)][:5],
        "risks": [
            "an item needs a file outside its manifest and is stopped before review",
            *([] if _tests(change) else ["no test names how the work is checked"]),
        ],
        "files": {"change": change, "protect": protect},
        "questions": questions,
    }


def _questions(sentences: list[str], change: list[str]) -> list[dict[str, Any]]:
    asked: list[dict[str, Any]] = []
    for sentence in (s for s in sentences if s.endswith("?")):
        default = "No" if _YES_NO.match(sentence) else "the simplest choice that meets the goals"
        asked.append({"text": sentence, "grade": "BLOCKING", "default": default})
    if not _tests(change):
        asked.append(
            {
                "text": "Which command proves an item is done?",
                "grade": "IMPORTANT",
                "default": "`python -m unittest`",
            }
        )
    asked.append(
        {"text": "Which labels should the items carry?", "grade": "NICE", "default": "feature"}
    )
    for number, question in enumerate(asked[:9], start=1):
        question["id"] = f"Q{number}"
        question["why"] = "the plan is written from the answer"
    return asked[:9]


def tasks_answer(context: dict[str, Any]) -> dict[str, Any]:
    paragraph = str(context.get("paragraph", ""))
    scope = context.get("scope") or {}
    change = [str(p) for p in scope.get("change") or []]
    decisions = [d for d in context.get("decisions") or [] if isinstance(d, dict)]
    groups = [(s, [p for p in _PATHS.findall(s) if p in change]) for s in _sentences(paragraph)]
    groups = [(s, files) for s, files in groups if files] or [
        (str(scope.get("objective") or "Deliver the work"), change)
    ]
    labels = _labels(decisions)
    items: list[dict[str, Any]] = []
    for number, (sentence, files) in enumerate(groups[:20], start=1):
        tests = _tests(files)
        items.append(
            {
                "id": f"T{number}",
                "title": _title(sentence),
                "description": sentence,
                "depends_on": [f"T{number - 1}"] if number > 1 else [],
                "files": files,
                "labels": labels,
                "check": f"`python -m unittest {tests[0][:-3].replace('/', '.')}`"
                if tests
                else _check(decisions),
            }
        )
    for decision in decisions:
        if decision.get("grade") == "NICE":
            continue
        target = max(items, key=lambda item: _overlap(item["description"], decision))
        target["description"] += f" Decided ({decision.get('id')}): {decision.get('answer')}"
    return {
        "milestone": "first delivery",
        "items": items,
        "verification": ["`python -m unittest`"],
        "rollback": [
            "Abort an item whose check still fails after its attempts, and revert its pull request",
            "Abort when a change needs a protected file: revise the scope instead",
        ],
    }


def _labels(decisions: list[dict[str, Any]]) -> list[str]:
    for decision in decisions:
        if "labels" in str(decision.get("question", "")).lower():
            words = [
                re.sub(r"[^A-Za-z0-9:._/+-]", "", w) for w in str(decision.get("answer")).split(",")
            ]
            return [w for w in words if w and w[0].isalnum()][:4] or ["feature"]
    return ["feature"]


def _check(decisions: list[dict[str, Any]]) -> str:
    for decision in decisions:
        answer = str(decision.get("answer", ""))
        if "command" in str(decision.get("question", "")).lower() and answer.strip():
            return " ".join(answer.split())
    return "`python -m unittest`"


def _title(sentence: str) -> str:
    clause = re.split(r"[,;:]", sentence, maxsplit=1)[0]
    words = re.sub(r"[\[\]()#`*_<>|]", " ", clause).split()
    title = " ".join(words)[:80].rstrip(" .!?") or "Deliver the work"
    return title


def _overlap(text: str, decision: dict[str, Any]) -> int:
    asked = {w.lower() for w in _WORD.findall(str(decision.get("question", ""))) if len(w) > 3}
    return len(asked & {w.lower() for w in _WORD.findall(text)})


def _tests(paths: list[str]) -> list[str]:
    return [p for p in paths if p.endswith(".py") and re.search(r"(^|/)test_[^/]*$", p)]


def _sentences(text: str) -> list[str]:
    found = (" ".join(s.split()) for s in _SENTENCE.split(text))
    return [s for s in found if _WORD.search(s)][:20]


def _unique(values: Any) -> list[str]:
    out: list[str] = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _first_user_text(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return str(content or "")
    return ""


def _loads(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
