"""The behaviours in which engines differ, each declared once: :class:`Semantics` and its options.

Each option is one :func:`option` field of :class:`Semantics`: its default (the spec), its doc, the
engines that behave so, what it needs of another option, whether the campaigns draw it apart. The
class docstring, validation, :meth:`Semantics.to_dict`/:meth:`Semantics.from_dict`, the docs table,
the CLI flags and the harness's ``Capabilities`` mirrors are all read from these declarations
(:func:`options`); a new option is one more declaration here and the layer of the manager that reads
it. :func:`semantics_with` builds a class with more options (a throwaway option in a test).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .errors import ConfigError
from .validation import enum_value, printable_key, require_int

__all__ = [
    "FreeStale",
    "SuspendMode",
    "ReleaseOrder",
    "HitRule",
    "EvictionClock",
    "Option",
    "option",
    "options",
    "semantics_with",
    "Semantics",
]


class FreeStale(str, enum.Enum):
    """When blocks that fell out of the window are freed."""

    AT_COMMIT = "at-commit"  # the spec: commit (and resize) free newly stale blocks at once
    AT_ALLOCATE = "at-allocate"  # lazily (vLLM): commit frees nothing; the next resize frees first


class SuspendMode(str, enum.Enum):
    """What suspending a request does with its slots and lengths."""

    RELEASE = "release"  # the spec: free every slot, keep capacity and history
    RECOMPUTE = "recompute"  # vLLM's preemption: free every slot, drop the computed tokens (lengths -> 0)
    KEEP = "keep"  # TensorRT-LLM V2 with GPU memory only: nothing is freed; resume allocates nothing new


class HitRule(str, enum.Enum):
    """Which blocks of a reused prefix a first resume takes as cache hits (with ``cache_freed``)."""

    PER_BLOCK = "per-block"  # the spec: every block it must hold whose content some slot keeps
    # vLLM: one hit length for every life cycle, the longest prefix of whole blocks (at most the reused
    # ones) for which every life cycle finds each block it needs at that length (its blocks live at
    # that history; where none is, the last block before it: vLLM declares a match only on a found
    # block); the blocks past it are computed again
    COMMON_PREFIX = "common-prefix"


class ReleaseOrder(str, enum.Enum):
    """When a resize frees the blocks it made stale."""

    RELEASE_FIRST = "release-first"  # the spec: freed before the call allocates
    HOLD_UNTIL_RETURN = "hold-until-return"  # TensorRT-LLM: held until the call returns


class EvictionClock(str, enum.Enum):
    """When an SWA life cycle's eviction runs (with ``eviction_interval`` e; :mod:`~.cadence`)."""

    TOKENS = "tokens"  # the spec: at least e tokens left the window since the cursor (floors.eviction_due)
    DECODES = "decodes"  # SGLang 0.5.13.post1: the request's decode counter d (decodes so far) has d % e == 1
    FORWARDS = "forwards"  # SGLang 0.5.14-0.5.17: its last forward's number % e == 0, from its second decode


#: The key of an option's declaration in its attrs field's metadata.
OPTION_KEY = "swafloor.semantics.option"


@attrs.frozen
class Option:
    """One semantics option as declared.

    ``name``: the field (and the serialised key). ``default``: the spec's behaviour; its type says the
    option's kind (a bool, a count, an enum). ``summary``: one line (the CLI's help, the docs table). ``minimum``: the least count accepted. ``doc``: what the
    behaviour is. ``engines``: the engines that behave so (with the value they take). ``needs``:
    ``(other option, value)`` the other must have whenever this one is off its default. ``always_written``:
    serialised even at its default (the five first options, as every trace has them); every other option
    is written only when set, so traces of every other semantics stay as they were. ``drawn_apart``:
    a backend serving every semantics draws this option only where its ``Capabilities`` declare the
    option's mirror (a bool of the same name), a campaign of its own; the text names what is drawn."""

    name: str
    default: Any
    summary: str
    doc: str
    engines: tuple[str, ...] = ()
    needs: tuple[str, Any] | None = None
    minimum: int = 0
    always_written: bool = False
    drawn_apart: str = ""
    flag: str = ""  # the command line's flag, when not ``--`` and the name with dashes

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def enum_type(self) -> type[enum.Enum] | None:
        return type(self.default) if isinstance(self.default, enum.Enum) else None

    @property
    def is_flag(self) -> bool:
        return isinstance(self.default, bool)

    @property
    def values(self) -> tuple[Any, ...] | None:
        """The serialised values allowed, or None for a count (any integer >= ``minimum``)."""
        if self.enum_type is not None:
            return tuple(m.value for m in self.enum_type)
        return (True, False) if self.is_flag else None

    def serialised(self, value: Any) -> Any:
        """``value`` as JSON holds it: an enum's value, else the value itself."""
        return value.value if isinstance(value, enum.Enum) else value

    def describe_needs(self) -> str:
        """``needs semantics.OTHER`` (a flag that must be on) or ``needs semantics.OTHER VALUE``; '' when none."""
        if self.needs is None:
            return ""
        other, value = self.needs
        return f"needs semantics.{other}" + ("" if value is True else f" {value}")


def _check_flag(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"semantics.{attribute.name}", value, "must be true or false")


def _check_count(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    require_int(f"semantics.{attribute.name}", value, attribute.metadata[OPTION_KEY].minimum)


def _to_enum(enum_type: type[enum.Enum]):
    def convert(value: Any, field: attrs.Attribute) -> Any:
        return enum_value(f"semantics.{field.name}", enum_type, value)

    return attrs.Converter(convert, takes_field=True)


def option(default: Any, summary: str, doc: str, engines: tuple[str, ...] = (), needs: tuple[str, Any] | None = None,
           minimum: int = 0, always_written: bool = False, drawn_apart: str = "", flag: str = "") -> Any:
    """Declare one option of a :class:`Semantics` class (a field of it): see :class:`Option`. Its
    checks follow from the default's type: an enum converts from its value (``ConfigError`` naming
    the choices), a bool must be a bool, a count an integer >= ``minimum``."""
    declared = Option("", default, summary, " ".join(doc.split()), tuple(engines), needs, minimum, always_written, drawn_apart,
                      flag)
    metadata = {OPTION_KEY: declared}
    if isinstance(default, enum.Enum):
        return attrs.field(default=default, converter=_to_enum(type(default)), metadata=metadata)
    if isinstance(default, bool):
        return attrs.field(default=default, validator=_check_flag, metadata=metadata)
    if isinstance(default, int):
        return attrs.field(default=default, validator=_check_count, metadata=metadata)
    raise TypeError(f"a semantics option's default is a bool, an int or an enum, got {default!r}")


def options(semantics_class: type | None = None) -> tuple[Option, ...]:
    """The options a :class:`Semantics` class (default: :class:`Semantics`) declares, in order."""
    fields = attrs.fields(Semantics if semantics_class is None else semantics_class)
    return tuple(attrs.evolve(f.metadata[OPTION_KEY], name=f.name) for f in fields if OPTION_KEY in f.metadata)


def _class_doc(lead: str, semantics_class: type) -> str:
    """The class docstring: ``lead``, then each option's doc, engines and needs, from its declaration."""
    lines = [lead, ""]
    for o in options(semantics_class):
        extra = "".join(f" {part}." for part in (
            o.describe_needs().capitalize(), f"Engines: {'; '.join(o.engines)}" if o.engines else "") if part)
        lines.append(f"``{o.name}`` (default ``{o.serialised(o.default)}``), {o.summary}: {o.doc}{extra}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_LEAD = """The behaviours in which real engines differ from one another, each a modelled choice, so a
backend is compared with the reference configured to the semantics it claims. Each option is
declared once (:func:`option`); the list below is generated from those declarations."""


@attrs.frozen
class Semantics:
    """The behaviours in which real engines differ from one another (replaced, below the class, by the
    docstring generated from the option declarations that follow)."""

    in_flight_tokens: int = option(0, "tokens scheduled but not yet computed (k)", """
        Tokens scheduled but not yet computed (k): blocks are released on history ``max(0, h - k)``, so a
        window keeps ``W + k`` tokens and the floor is :func:`~.floors.in_flight_floor`.""",
        engines=("vLLM with asynchronous scheduling: 1",), always_written=True, flag="--in-flight")
    free_stale: FreeStale = option(FreeStale.AT_COMMIT, "when blocks that fell out of the window are freed", """
        When blocks that fell out of the window are freed (:class:`FreeStale`): ``at-commit`` frees them
        at once (commit and resize); ``at-allocate`` frees nothing at commit, the request's next resize
        first frees what is stale, and that release stands even if the allocation then fails.""",
        engines=("vLLM: at-allocate",), always_written=True)
    suspend: SuspendMode = option(SuspendMode.RELEASE, "what suspending a request does with its slots and lengths", """
        What suspending a request does (:class:`SuspendMode`): ``release`` frees every slot and keeps the
        lengths; ``recompute`` frees every slot and drops the computed tokens; ``keep`` frees nothing, and
        resume allocates nothing new.""",
        engines=("vLLM's preemption: recompute", "TensorRT-LLM V2 with GPU memory only: keep"), always_written=True)
    first_resume_copy: bool = option(True, "a first resume holds a transient slot to copy a reused partial block", """
        The first resume of a request whose reused history ends mid-block holds one transient slot per
        attention life cycle for a private copy (SSM: one for the state snapshot when the reused history
        is above 0); engines that load a reused prefix in place need none.""",
        engines=("vLLM: false", "SGLang: false"), always_written=True)
    release_order: ReleaseOrder = option(ReleaseOrder.RELEASE_FIRST, "when a resize frees the blocks it made stale", """
        When a resize frees the blocks it made stale (:class:`ReleaseOrder`): before it allocates, or held
        until the call returns (blocks cut off by a smaller capacity are freed before allocating in both
        orders). ``Manager(config, release_order=...)`` overrides it.""",
        engines=("TensorRT-LLM: hold-until-return",), always_written=True)
    refused_keeps_stale: bool = option(False, "a refused resize keeps the blocks that left the window", """
        Blocks that left the window are freed only by a resize that succeeds: a resize releases what is
        stale at its own release point, the blocks stale since the last release included, and its gate
        counts all of them as free; a refused resize frees nothing (under plain ``at-allocate`` the release
        at the start of a resize stands even when the allocation fails). A lone request is never refused
        where ``at-allocate`` admits it (:mod:`~.refusal`).""",
        engines=("LMDeploy: its window block manager drops blocks only inside an allocation that succeeds",),
        needs=("free_stale", "at-allocate"))
    stale_freed_on_growth: bool = option(False, "blocks that left the window are freed only by a resize that adds a block", """
        A resize frees the blocks that left the window of a life cycle only when it adds a block to that
        life cycle (its capacity spans more blocks than before); a resize that adds none, and a refused
        one, keeps them, and the next resize that adds a block frees everything stale at its own release
        point (:mod:`~.refusal`). A resume frees what is stale as before.""",
        engines=("LMDeploy 0.2.5 to 0.4.1 and 0.12.0 on: its decode schedule calls the window block manager, "
                 "which drops blocks only inside an allocation, only for a sequence that needs a new block",),
        needs=("refused_keeps_stale", True))
    window_ring: bool = option(False, "a sliding window is a fixed ring of blocks: nothing freed as it slides", """
        An SWA life cycle keeps the token at position ``p`` in ring slot ``p % W`` of its request's blocks: it
        holds the blocks of its first ``min(c, W)`` positions, :func:`~.ring.ring_blocks`, until the request is
        released, and frees nothing as the window slides (a new token overwrites the one that left the
        window); nothing is stale. Defined for windows without sink tokens (a config with sink tokens is
        refused). At most the floor, one block less unless ``(W - 1) % t == 0`` (:mod:`~.ring`).""",
        engines=("transformers' continuous batching: its sliding-window cache allocator",))
    eviction_interval: int = option(1, "tokens that leave a window before it frees its stale blocks (e)", """
        (e) An SWA life cycle frees its stale blocks at history ``h`` only when at least ``e`` tokens have
        left the window since its eviction cursor, ``h' + 1 - W >= cursor + e`` (``h' = max(0, h - k)``;
        the cursor is the first token of the first block not yet freed, :func:`~.floors.eviction_cursor`);
        then everything stale at ``h'`` goes. ``e = 1`` frees whatever is stale; the floor is
        :func:`~.floors.eviction_floor`.""",
        engines=("SGLang: SGLANG_SWA_EVICTION_INTERVAL",), minimum=1, drawn_apart="eviction intervals")
    eviction_clock: EvictionClock = option(EvictionClock.TOKENS, "when a window's eviction runs", """
        When an SWA life cycle's eviction runs (:class:`EvictionClock`; :mod:`~.cadence`). ``tokens``: the
        token gate of ``eviction_interval``. Otherwise a step is a decode when it asks one token past a
        computed history (``c = h + 1``, ``h >= 1``), else an extend; an extend, and every step of a
        life cycle without a window, frees everything stale at its history; a decode frees it only when
        its clock says so, else keeps what it last freed on: ``decodes``: its request's decodes since it
        was last resumed, ``d``, have ``d % e == 1`` (:func:`~.cadence.decode_clock_due`); ``forwards``:
        the manager counts its resizes that succeed and raise a capacity (each one forward of a batch of
        one request; a resize asking nothing new frees and counts nothing) and a decode's clock is the number of its request's previous step, due when a multiple of ``e`` from
        the request's second decode on (:func:`~.cadence.forward_clock_due`). A decode past the first is
        within :func:`~.cadence.decode_clock_floor` under ``decodes`` at ``e >= 2``; at ``e = 1`` it never
        frees, and under ``forwards`` no floor holds: the other requests' forwards decide (theorems
        ``decode-clock-*``, ``forward-clock-*``).""",
        engines=("SGLang 0.5.13.post1: decodes (ScheduleBatch.maybe_evict_swa, decode_batch_idx % e == 1)",
                 "SGLang 0.5.14-0.5.17: forwards (ScheduleBatch.maybe_evict_swa, forward_iter % e == 0)"),
        needs=("free_stale", "at-allocate"))
    window_interval: bool = option(False, "the eviction interval is the window's: t * max(1, floor((W-1)/t))", """
        The eviction interval of each SWA life cycle is made from its window, ``e = t * max(1, floor((W -
        1) / t))`` (:func:`~.cadence.window_interval`), not ``eviction_interval``.""",
        engines=("SGLang 0.5.13.post1: SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER 1 (the default) times "
                 "sliding_window_size, at least a page, floored to a page",),
        needs=("eviction_clock", "decodes"))
    prefix_sharing: bool = option(False, "a request created on another's committed prefix shares its blocks", """
        A request created on another's committed prefix (``Manager.create(..., share_with=...)``) takes
        the whole prefix blocks that request holds at its first resume as cache hits, one slot for all
        holders (see :mod:`~.sharing`); off, every request computes its prefix into slots of its own.""",
        engines=("vLLM's prefix cache", "SGLang's radix cache"), drawn_apart="prefix sharing")
    cache_freed: bool = option(False, "a freed block of committed tokens stays cached in its free slot", """
        A freed block whose tokens were all committed stays cached in its free slot: a later first resume
        on the same content takes it back as a hit, from a live holder or from the cache, and a slot taken
        from the pool evicts what it cached. A pool hands out first the free slots that keep nothing (the
        last freed first, then the never-used ones), then the cached ones least recently freed first
        (vLLM's free queue: uncached blocks prepended, cached ones appended); a request frees its blocks
        last block first, life cycle by life cycle, so a freed request's tail is evicted before its head.
        The cache takes no slot: a cached slot counts as free.""",
        engines=("vLLM's prefix cache", "SGLang's radix cache"), needs=("prefix_sharing", True))
    hit_rule: HitRule = option(HitRule.PER_BLOCK, "which blocks of a reused prefix a first resume takes as hits", """
        Which blocks of a reused prefix a first resume takes as cache hits (:class:`HitRule`).""",
        engines=("vLLM: common-prefix",), needs=("cache_freed", True))
    cache_scheduled: bool = option(False, "a block counts as computed once the step filling it is scheduled", """
        A block's content counts as computed, for the cache and for hits on live holders, once every token
        of it lies within the capacity its request reserved, not only once committed.""",
        engines=("vLLM: it hashes a block when the step that fills it is scheduled",), needs=("cache_freed", True))
    lookahead_tokens: int = option(0, "draft slots of speculative decoding (k)", """
        (k) Draft slots of speculative decoding: every decode step asks capacity ``h + 1 + k``, blocks are
        released on history as with the tokens in flight, so the minimum is
        :func:`~.floors.lookahead_floor` (the in-flight floor at ``in_flight_tokens + k``); the manager
        itself serves whatever capacity a step asks. Of a step of ``n = c - h > 0`` new tokens the last
        ``min(k, n - 1)`` are draft slots: held, but holding no token of the request yet, so under
        ``cache_scheduled`` the step names (makes findable) only the blocks within ``c - min(k, n - 1)``,
        and a step with no new token names nothing (vLLM caches up to the request's known tokens).""",
        engines=("vLLM: num_lookahead_tokens",))
    drafts_returned_at_commit: bool = option(False, "a commit gives back the slots past the committed tokens", """
        A commit gives back every block past its committed tokens: the request keeps capacity
        :func:`~.draft_return.returned_capacity` (its history), so the draft slots a step held (and any slot
        it did not commit) are freed at the commit, not kept to the next step; stale blocks are freed as
        ``free_stale`` says. A step still asks its capacity, ``h + 1 + k`` with ``lookahead_tokens``, so the
        floor is the same; between steps a request holds only its committed tokens' live blocks
        (:mod:`~.draft_return`, theorem ``drafts-returned-at-commit``).""",
        engines=("SGLang's EAGLE worker v1 (the default before 0.5.13.post1): its verify frees the rejected "
                 "draft slots at once (kv_allocated_len = kv_committed_len), and its draft slots are given "
                 "back before the draft forward (restore_state)",))
    eagle: bool = option(False, "an EAGLE drafter: the block after a hit is matched and given back", """
        Speculative decoding with an EAGLE drafter: a first resume's hit is
        :func:`~.cache_hit.longest_hit` with the pop (the block after the hit must be found too and lie
        within the reused tokens: the engine matched it and gave it back for the drafter to recompute);
        defined for windows without sink tokens (a config with sink tokens is refused).""",
        engines=("vLLM with an EAGLE drafter",), needs=("hit_rule", "common-prefix"),
        drawn_apart="EAGLE hits and draft slots")
    cache_aligned: bool = option(False, "only what a hit of an aligned length can take is cached", """
        The cache keeps only what a hit whose length is a multiple of the alignment (the lcm of the block
        sizes, :func:`~.cache_hit.alignment`) can take: a life cycle of ``t`` tokens per block names only
        the blocks within its :func:`~.cache_hit.cacheable_tokens` of the computed ones, and of those only
        the ones a hit reads (:func:`~.cache_hit.retained_block`). With one block size and windows of two
        or more tokens it changes nothing.""",
        engines=("vLLM's hybrid coordinator: computed tokens rounded down to its scheduler block size, with "
                 "EAGLE one block of the life cycle's own more; its retention mask for sliding-window groups",),
        needs=("cache_freed", True))
    cache_prompt_tail: bool = option(False, "the block a prompt ends inside is named by its whole hash blocks", """
        A full-attention life cycle whose block size differs from the config's ``t`` (the hash block size)
        names the block a request's prompt ends inside, while it fills, by the prompt's whole hash blocks
        (:func:`~.cache_hit.prompt_tail_tokens`): no hit reads that content, but a block freed with it is
        cached (the end of the free queue); a request's prompt is its reused history and the first token
        it computes itself.""",
        engines=("vLLM's partial prefix entry",), needs=("cache_freed", True))

    uncached_to_tail: bool = option(False, "a freed block that keeps nothing joins the free queue's end too", """
        A freed block that keeps nothing joins the end of the free queue, as a cached one does, not its
        front: a pool hands out the never-used slots first, then every freed slot, cached or not, least
        recently freed first (a request's blocks in the order it frees them), so a cached slot freed
        before an uncached one is evicted first.""",
        engines=("vLLM before 0.23.0: BlockPool.free_blocks appends every freed block to the free queue "
                 "(vllm-project/vllm#42656 prepends the ones without a hash)",),
        needs=("cache_freed", True))

    release_uncached_to_tail: bool = option(False, "a release frees a windowless life cycle's blocks to the free queue's end, cached or not", """
        The blocks a request's release (suspend, close) frees in a life cycle without a window (full
        attention, SSM) join the end of the free queue whether or not they keep content, each where the
        release has it (last block first), as under ``uncached_to_tail``; the blocks a sliding window
        frees, at a release or as they leave the window, keep the pool's order (the ones that keep nothing
        to its front). It moves no block between held and free: only which cached slots a later allocation
        evicts first (:mod:`~.free_order`).""",
        engines=("vLLM 0.23.0: FullAttentionManager (the base SingleTypeKVCacheManager.free) appends every "
                 "block it frees, while SlidingWindowManager.free and remove_skipped_blocks prepend the ones "
                 "without a hash (vllm-project/vllm#42656); 0.24.0's BlockPool.free_blocks prepends them on "
                 "every free",),
        needs=("cache_freed", True))

    prompt_lock: bool = option(False, "a request keeps its prompt's last window of SWA blocks until it is released", """
        A request keeps the SWA blocks of its prompt's last window (:func:`~.lifecycle.prompt_lock_range`: the
        last ``ceil((W - 1) / t)`` whole blocks before its prompt's last whole block ends; its prompt is
        its history at its first resume) from its first resume until it is suspended or closed, whether
        or not its window still reads them; the floor is :func:`~.floors.prompt_lock_floor`.""",
        engines=("SGLang's radix cache: the tree lock on the prefix a request matched or published "
                 "(SGLANG_OPT_RELEASE_PREFILL_SWA off, the default)",), needs=("prefix_sharing", True))
    publish_on_release: bool = option(False, "content is findable only once published: a prompt, a finished request", """
        Content becomes findable only when published: a first resume publishes its prompt's whole
        blocks, a close the whole blocks of its committed tokens (a suspension publishes nothing); the
        tokens a live request commits after its prompt are found by no hit until it closes. A first resume
        whose reused history ends on a block boundary computes its last block again and takes the
        published one: it holds, for the call, a slot per attention life cycle whose last reused block
        another request holds, and, per SWA life cycle, the block the last block's window reads before
        the prompt's last window unless another request holds it.""",
        engines=("SGLang's radix cache: a prompt's chunks and a finished request are inserted into the tree "
                 "(a prefilled page whose content the tree has is replaced by the tree's)",),
        needs=("cache_freed", True))
    load_holds_prefix: bool = option(False, "a first resume holds a block for every token it loads", """
        The first resume of a request created over reused history (``create(..., reused_history=...)``)
        loads what it does not find in a cache as new tokens of a request with nothing computed past its
        hit: in every attention life cycle it holds the blocks live at the hit (the common-prefix or EAGLE
        hit :meth:`~.hooks.Hooks.resume_hit_tokens` gives under ``cache_freed``; none otherwise) and a block
        for every token from the hit up to its capacity, the ones out of the window too: it frees on the
        hit (:meth:`~.hooks.Hooks.resume_released_on`), and what is stale at its history goes at the next
        release (the next resize; at commit under ``at-commit``). Without a hit the call needs
        :func:`~.floors.load_blocks` slots of such a life cycle, more than the floor once the capacity
        passes ``floor * t``.""",
        engines=("vLLM before 0.14.1: its scheduler allocated the tokens a KV connector loads (past a "
                 "prefix-cache hit) as new tokens of a request with nothing computed "
                 "(vllm-project/vllm#30166 gives the skipped ones the null block)",),
        drawn_apart="connector loads holding every loaded token")

    preallocate_tokens: int = option(0, "a step that needs a block takes ceil(P/t) more, as many as the pool has free (P)", """
        (P) A step (a resume or a resize) whose capacity needs blocks past the request's table takes the
        blocks it needs and ``ceil(P / t)`` more past them, as many of those as the pool has free once the
        step's own blocks are taken (:func:`~.preallocation.preallocated_blocks`); the table then spans
        them, and a later step within them takes nothing. The gate is the spec's (a step is refused only
        when its own blocks do not fit); what the extra blocks cost a waiting request is
        :func:`~.preallocation.withheld_blocks` (theorems ``preallocation-within-free`` and
        ``preallocation-keeps-waiting``). Suspension and release drop the table (:mod:`~.preallocation`).""",
        engines=("vLLM 0.8.3 and 0.8.4: KVCacheManager's num_preallocate_tokens, 64 (vllm-project/vllm#16941 "
                 "removed it in 0.8.5)",), drawn_apart="pre-allocation")

    def __attrs_post_init__(self) -> None:
        for o in options(type(self)):
            value = getattr(self, o.name)
            if o.needs is None or value == o.default:
                continue
            other, wanted = o.needs
            if _declared(type(self), other).serialised(getattr(self, other)) != wanted:
                raise ConfigError(f"semantics.{o.name}", o.serialised(value), o.describe_needs())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every option always written, the others only when off their default."""
        values = [(o, getattr(self, o.name)) for o in options(type(self))]
        return {o.name: o.serialised(value) for o, value in values if o.always_written or value != o.default}

    @classmethod
    def from_dict(cls, data: Any) -> "Semantics":
        if not isinstance(data, dict):
            raise ConfigError("config.semantics", data, "must be an object")
        known = [o.name for o in options(cls)]
        for key in data:
            if key not in known:
                raise ConfigError(f"config.semantics.{printable_key(key)}", data[key], "unknown field")
        return cls(**{key: data[key] for key in known if key in data})


def _declared(semantics_class: type, name: str) -> Option:
    return attrs.evolve(attrs.fields_dict(semantics_class)[name].metadata[OPTION_KEY], name=name)


Semantics.__doc__ = _class_doc(_LEAD, Semantics)


def semantics_with(name: str = "Semantics", **declared: Any) -> type[Semantics]:
    """A subclass of :class:`Semantics` with more options, each an :func:`option` field: everything
    read from the declarations (checks, serialised form, docs table, CLI flags, mirrors) serves them."""
    cls = attrs.make_class(name, declared, bases=(Semantics,), frozen=True)
    _check_declarations(cls)
    cls.__doc__ = _class_doc(_LEAD, cls)
    return cls


def _check_declarations(semantics_class: type) -> None:
    """Each ``needs`` names a declared option and one of its values (checked at import)."""
    names = {o.name: o for o in options(semantics_class)}
    for o in names.values():
        if o.needs is not None:
            other, value = o.needs
            if other not in names or (names[other].values is not None and value not in names[other].values):
                raise TypeError(f"semantics option {o.name}: needs {o.needs!r}, not a declared option and value")


_check_declarations(Semantics)
