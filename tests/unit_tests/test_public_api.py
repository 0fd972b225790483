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
    "ContextPipelineError",
    "SummaryTimeoutError",
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


ENTRY_POINTS = {
    "langchain_context_pipeline.langgraph": {"ContextPipelineHook", "create_pre_model_hook"},
    "langchain_context_pipeline.middleware": {"ContextPipelineMiddleware"},
    "langchain_context_pipeline.deepagents": {"DeepAgentContextMiddleware"},
    "langchain_context_pipeline.recall": {"create_recall_tool", "archive_originals"},
    "langchain_context_pipeline.tokens": {"estimate_tokens", "tiktoken_counter"},
}


def test_the_entry_point_paths_import_without_a_warning() -> None:
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path, names in ENTRY_POINTS.items():
            module = importlib.import_module(path)
            assert names <= set(module.__all__), path
            for name in names:
                assert getattr(module, name) is not None


def test_every_moved_module_path_still_imports_with_a_deprecation_warning() -> None:
    import importlib
    import sys

    import pytest

    from langchain_context_pipeline._moved import MOVED

    for old, new in MOVED.items():
        path = f"langchain_context_pipeline.{old}"
        sys.modules.pop(path, None)
        with pytest.warns(DeprecationWarning, match=rf"{path} moved to .*{new}"):
            module = importlib.import_module(path)
        target = importlib.import_module(f"langchain_context_pipeline.{new}")
        for name in getattr(target, "__all__", ()) or [n for n in vars(target) if n[0].isupper()]:
            # the very objects of the new module: isinstance and saved state keep working
            assert getattr(module, name) is getattr(target, name), (old, name)


def test_a_class_imported_from_an_old_path_is_the_new_class() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_context_pipeline.carried import CarriedSummary as old  # type: ignore[import-not-found]
        from langchain_context_pipeline.pruner import Pruner as old_pruner  # type: ignore[import-not-found]

    assert old is package.CarriedSummary
    assert old_pruner is package.Pruner


def test_every_error_of_the_pipeline_is_a_context_pipeline_error() -> None:
    assert issubclass(package.BudgetError, package.ContextPipelineError)
    assert issubclass(package.BudgetError, ValueError)
    assert issubclass(package.SummaryTimeoutError, package.ContextPipelineError)
    assert issubclass(package.SummaryTimeoutError, TimeoutError)
    from langchain_context_pipeline.stages import model_call

    assert model_call.SummaryTimeoutError is package.SummaryTimeoutError
