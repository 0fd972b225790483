from __future__ import annotations

import langchain_context_pipeline as package

EXPECTED = {
    "BUILTIN_BRIEFS",
    "CONDENSED_TAG",
    "DIGEST",
    "CompressionReport",
    "CompressionResult",
    "CondenseStats",
    "Condenser",
    "ContextPipeline",
    "PruneStats",
    "Pruner",
    "SummaryMemory",
    "CarriedSummary",
    "TokenCounter",
    "BriefFunction",
    "brief_for",
    "estimate_tokens",
    "hard_truncate",
    "is_pipeline_summary",
    "resolve_token_counter",
    "tiktoken_counter",
    "exact_token_counter",
    "PipelineSettings",
    "PruneSettings",
    "CondenseSettings",
    "TruncateStats",
    "SUMMARY_STATE_KEY",
    "BudgetError",
    "load_transcript",
}


def test_all_is_the_public_api() -> None:
    assert set(package.__all__) == EXPECTED
    for name in package.__all__:
        assert hasattr(package, name), name


def test_load_transcript_is_the_cli_reader() -> None:
    from langchain_context_pipeline.cli.transcripts import load_transcript

    assert package.load_transcript is load_transcript


def test_unknown_attribute_is_an_attribute_error() -> None:
    assert not hasattr(package, "no_such_name")


def test_condensed_tag_text() -> None:
    assert package.CONDENSED_TAG == "[CONTEXT CONDENSED — REFERENCE ONLY]"
