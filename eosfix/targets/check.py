"""One target checked, whatever it is: a local folder or GGUF file through the pipeline, a Hub
repo by ``eosfix.targets.hub``, a string that named nothing as its error. What every command,
the page and the bot call; the results go to a renderer as they are."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eosfix import pipeline
from eosfix.core.errors import NotChecked
from eosfix.result import RepoResult
from eosfix.runtimes import Pins
from eosfix.targets.checked import Checked
from eosfix.targets.parse import HubTarget, LocalFolder, LocalGguf, OllamaTarget

if TYPE_CHECKING:
    from eosfix.sources.hub.read import HubReader
    from eosfix.targets.open import Unit


def check_texts(texts: Sequence[str], *, local: bool = True, **options: Any) -> Iterator[Checked]:
    """What every command does with the strings it is given: each opened
    (``eosfix.targets.open``: parsed, a folder of GGUF files into its files, each unit once)
    and checked (``check_target``, with ``options``), in order."""
    from eosfix.targets.open import open_targets

    for unit in open_targets(texts, local=local):
        yield check_target(unit, **options)


def check_text(text: str, **options: Any) -> Checked:
    """One string checked as one target (``explain``, the port kit): parsed, never opened
    into the files a folder holds."""
    from eosfix.targets.open import Refused
    from eosfix.targets.parse import parse

    try:
        unit: Unit = parse(text)
    except NotChecked as exc:
        unit = Refused(text, exc)
    return check_target(unit, **options)


def check_target(
    unit: Unit,
    *,
    config_json: bool = False,
    keep_ids: Iterable[int] = (),
    pins: Pins | None = None,
    reader: HubReader | None = None,
    replace_symlinks: bool | None = None,
) -> Checked:
    """Check ``unit`` read-only (``eosfix.targets.open``): a local one as ``eosfix.api.check``
    does (what would stop ``fix`` writing asked too, ``replace_symlinks`` as for ``check``'s
    command, or False as ``fix`` writes), a Hub repo by ``check_hub_target``."""
    if isinstance(unit, (LocalFolder, LocalGguf)):
        result = pipeline.check(
            unit.path, config_json=config_json, keep_ids=keep_ids, pins=pins,
            replace_symlinks=replace_symlinks,
        )  # fmt: skip
        return Checked((result,))
    if isinstance(unit, HubTarget):
        from eosfix.sources.hub.read import quiet_progress  # only a Hub target reads the Hub
        from eosfix.targets.hub import check_hub_target

        with quiet_progress():
            return check_hub_target(
                unit, reader=reader, keep_ids=keep_ids, pins=pins, config_json=config_json
            )
    if isinstance(unit, OllamaTarget):
        return Checked((_ollama_model(unit, pins),))
    return Checked((RepoResult(Path(unit.shown), error=unit.error),))


def _ollama_model(unit: OllamaTarget, pins: Pins | None) -> RepoResult:
    """A model of the store (``pipeline.check_ollama``); a manifest that cannot be read is
    the model's error, named as ``ollama list`` names it."""
    from eosfix.containers.ollama.container import OllamaVerdict
    from eosfix.containers.ollama.read import OllamaModel, model_name, read_manifest
    from eosfix.core.errors import EosfixError

    try:
        model = read_manifest(unit.store, unit.manifest)
    except EosfixError as exc:
        name = model_name(unit.manifest.relative_to(unit.store / "manifests"))
        verdict = OllamaVerdict(OllamaModel(name, unit.manifest, None, None))
        return RepoResult(unit.manifest, error=exc, label=name, container="ollama",
                          ollama=verdict)  # fmt: skip
    return pipeline.check_ollama(model, pins=pins)
