"""Query rewriting: the LLM tasks that give a query its variants.

``translate`` (German translation -> variant ``de``), ``concepts`` (JSON: legal area, key
concepts, provisions, German keywords, estimated count, citation mix -> variant ``concepts`` and
``QueryState.concepts``), ``hyde`` (a German analysis that names no citation), ``sparse``
(German keywords and statute headings), ``dense`` (a one-paragraph statement of the issue).

The LLM never writes an output citation: every citation-like string in what it returns (found by
the same extractor that finds citations in questions) is moved to ``QueryState.llm_citations``,
which the ``llm_seeds`` stage resolves onto corpus strings (an unknown one resolves to nothing),
and is cut out of the invented texts (HyDE, keywords, issue statement) so that a made-up
reference cannot steer retrieval.  The translation keeps them: they are the question's own.

JSON output that does not parse or lacks a key is repaired by one more call (``repair_json``),
``JSON_RETRIES`` times; after that the task is skipped for that query with a warning, and
the run goes on.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from lexrag import citations as cit
from lexrag.errors import LLMOutputError
from lexrag.llm.client import book
from lexrag.llm.prompts import load_template
from lexrag.queries import QueryState, Variant
from lexrag.signals import TASK_VARIANTS

__all__ = ["rewrite_queries", "parse_json_object", "json_calls", "question_text", "CONCEPT_SCHEMA", "strip_citations"]

log = logging.getLogger(__name__)

JSON_RETRIES = 1  # repair calls for an answer that is not the JSON asked for; then the task is skipped for that query

# key -> (type, required)
CONCEPT_SCHEMA: dict[str, tuple[type, bool]] = {
    "legal_area": (str, True),
    "key_concepts": (list, True),
    "provisions": (list, False),
    "keywords_de": (list, True),
    "estimated_citations": (int, False),
    "citation_mix": (dict, False),
}


def parse_json_object(text: str, schema: dict[str, tuple[type, bool]]) -> dict:
    """The JSON object in ``text`` (code fences, prose around it, trailing commas and typographic
    quotes tolerated), checked against ``schema``; :class:`LLMOutputError` says what is wrong."""
    s = text.strip()
    s = re.sub(r"^```(?:json)?\s*|\s*```$", "", s)
    start, end = s.find("{"), s.rfind("}")
    if start < 0 or end <= start:
        raise LLMOutputError("no JSON object in the answer")
    body = s[start : end + 1]
    for attempt in (body, re.sub(r",\s*([}\]])", r"\1", body.replace("“", '"').replace("”", '"'))):
        try:
            obj = json.loads(attempt)
            break
        except ValueError as e:
            err = e
        except RecursionError:  # brackets nested deeper than the parser recurses: no object we could use
            raise LLMOutputError("not valid JSON: nested too deeply") from None
    else:
        raise LLMOutputError(f"not valid JSON: {err}")
    if not isinstance(obj, dict):
        raise LLMOutputError("the JSON is not an object")
    out: dict[str, Any] = {}
    for key, (tp, required) in schema.items():
        if key not in obj or obj[key] is None:
            if required:
                raise LLMOutputError(f"key {key!r} is missing")
            continue
        v = obj[key]
        if tp is int:
            if isinstance(v, str) and v.strip().isdigit():
                v = int(v)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool):
                raise LLMOutputError(f"key {key!r} must be an integer, got {v!r}")
        elif tp is list:
            if isinstance(v, str):
                v = [x.strip() for x in re.split(r"[;,]", v) if x.strip()]
            if not isinstance(v, list):
                raise LLMOutputError(f"key {key!r} must be a list, got {type(v).__name__}")
            v = [str(x).strip() for x in v if str(x).strip()]
        elif not isinstance(v, tp):
            raise LLMOutputError(f"key {key!r} must be a {tp.__name__}, got {type(v).__name__}")
        out[key] = v
    return out


def strip_citations(text: str) -> tuple[str, list[str]]:
    """``text`` without the citations in it, and those citations (formatted)."""
    text = cit.normalize_text(text)
    found = cit.extract(text)
    if not found:
        return text, []
    parts, last = [], 0
    for e in found:
        if e.start >= last:
            parts.append(text[last : e.start])
            last = e.end
    parts.append(text[last:])
    cleaned = re.sub(r"\(\s*[,;]?\s*\)", "", " ".join(p.strip() for p in parts if p.strip()))
    return re.sub(r"\s{2,}", " ", cleaned).strip(), [e.citation.format() for e in found]


_PREFIX = re.compile(r"^\s*(?:German translation|Translation|Übersetzung|Keywords|Stichwörter)\s*:\s*", re.I)


def question_text(q: QueryState, cfg) -> str:
    if len(q.text) > cfg.max_question_chars:
        log.warning("query %r: %d characters; cut to llm.max_question_chars=%d for the LLM prompts",
                    q.query_id, len(q.text), cfg.max_question_chars)
        return q.text[: cfg.max_question_chars]
    return q.text


def _account(q: QueryState, g, stage: str = "rewrite") -> None:
    book(q, stage, g)


def json_calls(client, task: str, states: list[QueryState], values: list[dict], schema,
               stage: str = "rewrite") -> dict[str, dict]:
    """Run the JSON template ``task`` once per (state, values) pair; repair what does not parse
    (``JSON_RETRIES`` extra calls of ``repair_json``); return query id -> parsed object.  A
    query whose answer stays unusable is left out, with a warning and a ``json_failures`` cost:
    the caller goes on without it."""
    template = load_template(task)
    gens = client.generate(template, values, [q.query_id for q in states])
    parsed: dict[str, dict] = {}
    pending: list[tuple[QueryState, str, str]] = []
    for q, g in zip(states, gens):
        _account(q, g, stage)
        try:
            parsed[q.query_id] = parse_json_object(g.text, schema)
        except LLMOutputError as e:
            pending.append((q, g.text, str(e)))
    repair = load_template("repair_json")
    for _ in range(JSON_RETRIES):
        if not pending:
            break
        rvalues = [{"keys": ", ".join(schema), "error": err, "output": text[:4000]} for _, text, err in pending]
        gens = client.generate(repair, rvalues, [q.query_id for q, _, _ in pending])
        still = []
        for (q, _, _), g in zip(pending, gens):
            _account(q, g, stage)
            try:
                parsed[q.query_id] = parse_json_object(g.text, schema)
            except LLMOutputError as e:
                still.append((q, g.text, str(e)))
        pending = still
    for q, _, err in pending:
        log.warning("query %r: LLM task %r gave no usable JSON (%s) after %d repair(s); skipped",
                    q.query_id, task, err, JSON_RETRIES)
        q.add_cost(stage, json_failures=1)
    return parsed


def rewrite_queries(states: list[QueryState], client, cfg) -> dict[str, list[Variant]]:
    """Run ``cfg.tasks`` (an :class:`lexrag.config.LLMConfig`) over the query states.  Returns the
    new variants per query id; also fills ``QueryState.concepts`` and ``llm_citations``."""
    states = [q for q in states if q.text]
    out: dict[str, list[Variant]] = {q.query_id: [] for q in states}
    for task in cfg.tasks:
        name = TASK_VARIANTS[task]
        if task == "concepts":
            template = load_template("concepts")
            parsed = json_calls(client, "concepts", states, [{"question": question_text(q, cfg)} for q in states],
                                CONCEPT_SCHEMA)
            for q in states:
                obj = parsed.get(q.query_id)
                if obj is None:
                    continue
                q.concepts = obj
                q.llm_citations.extend(obj.get("provisions", []))
                words = " ".join(obj.get("keywords_de", []) + obj.get("key_concepts", []) + [obj.get("legal_area", "")])
                text, found = strip_citations(words)
                q.llm_citations.extend(found)
                if text:
                    out[q.query_id].append(Variant(name, text, f"llm:{template.id}"))
            continue
        template = load_template(task)
        gens = client.generate(template, [{"question": question_text(q, cfg)} for q in states], [q.query_id for q in states])
        for q, g in zip(states, gens):
            _account(q, g)
            text = _PREFIX.sub("", g.text).strip()
            cleaned, found = strip_citations(text)
            q.llm_citations.extend(found)
            if task != "translate":
                text = cleaned
            if text:
                out[q.query_id].append(Variant(name, text, f"llm:{template.id}"))
            else:
                log.warning("query %r: LLM task %r returned no text; variant skipped", q.query_id, task)
    return out
