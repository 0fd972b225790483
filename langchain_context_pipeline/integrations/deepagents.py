"""deepagents entry point: the pipeline as a deep agent's context manager.

    >>> from langchain_context_pipeline.integrations.deepagents import DeepAgentContextMiddleware
    >>> from langchain_context_pipeline import DIGEST
    >>> DeepAgentContextMiddleware(threshold=16000, model=DIGEST).name
    'SummarizationMiddleware'

``create_deep_agent`` builds each agent's middleware stack itself (the main agent,
the general-purpose subagent, every declarative subagent) and puts its own
summarization in the slot named ``"SummarizationMiddleware"``. It has no parameter
to replace it, but it merges the caller's middleware into that stack **by name**:
a middleware whose ``name`` matches an entry takes that entry's place, in the
same position. :class:`DeepAgentContextMiddleware` is a
:class:`~langchain_context_pipeline.integrations.middleware.ContextPipelineMiddleware` that
answers to that name, so:

- in ``create_deep_agent(middleware=[...])`` it replaces the main agent's
  summarization, and deepagents hands it to the general-purpose subagent too
  (the default subagent inherits middleware that overrides one of its slots);
- in a declarative subagent's own ``middleware`` it replaces that subagent's
  summarization (:func:`with_context_pipeline` adds it to every spec).

Why this hook: it is the one deepagents documents for replacing a built-in
middleware, it is local to the agent being built, and it keeps the slot's
position in the stack (after the filesystem and subagent middleware, before
prompt caching). The other way, a harness profile whose ``excluded_middleware``
drops ``SummarizationMiddleware``, is registered process-wide (every deep agent
for that model is affected) and is marked beta.

What deepagents keeps doing: its ``FilesystemMiddleware`` still writes tool
results over its eviction limit to files the agent can read back, and the rest of
the stack is untouched. Only its summarization is replaced, and with it its
history offloading and its context-overflow retry.

This is the only module of the package that imports ``deepagents``; it needs the
``deepagents`` extra: ``pip install 'langchain-context-pipeline[deepagents]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

try:
    from deepagents import create_deep_agent as _create_deep_agent
except ImportError as exc:
    raise ImportError(
        "langchain_context_pipeline.integrations.deepagents needs deepagents: "
        "pip install 'langchain-context-pipeline[deepagents]'"
    ) from exc

from langchain_context_pipeline.integrations.middleware import ContextPipelineMiddleware

__all__ = [
    "SUMMARIZATION_SLOT",
    "DeepAgentContextMiddleware",
    "create_deep_agent",
    "with_context_pipeline",
]

SUMMARIZATION_SLOT = "SummarizationMiddleware"
"""The name of deepagents' summarization entry in every stack it builds."""


class DeepAgentContextMiddleware(ContextPipelineMiddleware):
    """:class:`ContextPipelineMiddleware` in deepagents' summarization slot.

    Example:
        .. code-block:: python

            from deepagents import create_deep_agent

            context = DeepAgentContextMiddleware(threshold=("fraction", 0.8), model=model)
            agent = create_deep_agent(
                model,
                tools,
                middleware=[context],
                subagents=with_context_pipeline(subagents, context),
            )
    """

    @property
    def name(self) -> str:
        """``"SummarizationMiddleware"``: deepagents puts this middleware in that slot."""
        return SUMMARIZATION_SLOT


def _is_declarative(spec: Mapping[str, Any]) -> bool:
    """Whether deepagents builds this subagent's stack (not compiled, not remote)."""
    return "runnable" not in spec and "graph_id" not in spec


def with_context_pipeline(
    subagents: Sequence[Mapping[str, Any]] | None, middleware: DeepAgentContextMiddleware
) -> list[dict[str, Any]]:
    """Return copies of ``subagents`` whose declarative specs use ``middleware``.

    Each declarative spec (one deepagents builds a stack for) gets ``middleware``
    in its own ``middleware`` list, where deepagents swaps it into the
    summarization slot; a ``SummarizationMiddleware``-named entry already there is
    replaced. Compiled and remote subagents manage their own context and are
    returned as they are. The caller's specs are not changed.

    Args:
        subagents: the ``subagents`` argument of ``create_deep_agent``.
        middleware: the middleware to use (it may be the main agent's: its
            running summary lives in each agent's own state).

    Raises:
        TypeError: when ``middleware`` is not a :class:`DeepAgentContextMiddleware`
            or a spec is not a mapping.
    """
    if not isinstance(middleware, DeepAgentContextMiddleware):
        raise TypeError(
            "with_context_pipeline needs a DeepAgentContextMiddleware (a middleware named "
            f"{SUMMARIZATION_SLOT!r}), got {type(middleware).__name__}"
        )
    specs: list[dict[str, Any]] = []
    for index, spec in enumerate(subagents or ()):
        if not isinstance(spec, Mapping):
            raise TypeError(f"subagents[{index}] is {type(spec).__name__}, not a subagent spec")
        if not _is_declarative(spec):
            specs.append(dict(spec))
            continue
        own = [
            m for m in spec.get("middleware", ()) if getattr(m, "name", None) != SUMMARIZATION_SLOT
        ]
        specs.append({**spec, "middleware": [*own, middleware]})
    return specs


def create_deep_agent(
    model: Any = None,
    tools: Sequence[Any] | None = None,
    *,
    context: DeepAgentContextMiddleware,
    middleware: Sequence[Any] = (),
    subagents: Sequence[Mapping[str, Any]] | None = None,
    **keywords: Any,
) -> Any:
    """``deepagents.create_deep_agent`` with ``context`` as every agent's context manager.

    The main agent, the general-purpose subagent and each declarative subagent
    compress with ``context`` instead of deepagents' summarization.

    Args:
        model: the agent's model (as ``deepagents.create_deep_agent`` takes it).
        tools: the agent's tools.
        context: the middleware that keeps each request under budget.
        middleware: more middleware for the main agent.
        subagents: subagent specs (see :func:`with_context_pipeline`).
        **keywords: anything else ``deepagents.create_deep_agent`` takes.

    Returns:
        The compiled deep agent.
    """
    others = [m for m in middleware if getattr(m, "name", None) != SUMMARIZATION_SLOT]
    return _create_deep_agent(
        model,
        tools,
        middleware=[*others, context],
        # The specs are the caller's, with one middleware added: still SubAgent dicts.
        subagents=cast(Any, with_context_pipeline(subagents, context)),
        **keywords,
    )
