"""Every pattern of `rltrain/config/hydra_texts.py` against the error the real Hydra raises for
it: a Hydra or OmegaConf release that rewords one fails here, where `explain` would quietly fall
back to the error's first line."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from rltrain.config import hydra_texts
from rltrain.config.grammar import grammar_refusal
from rltrain.config.store import register_configs

CASES = {  # pattern -> (config, overrides, what it reads there)
    "NO_DEFAULT": ("eval", ["algo=dqn"], ("algo",)),
    "NOT_KEY_VALUE": ("eval", ["run.pt"], ("run.pt",)),
    "UNKNOWN_KEY": ("config", ["algo.lrr=1"], ("lrr", "PPOConfig")),
    "MISSING_OPTION": ("config", ["algo=pppo"], ("algo/pppo",)),
    "NOT_OPTIONAL": ("config", ["env.backend=null"], ("env.backend",)),
    "APPEND": ("config", ["env.kwargs.foo=1"], ("env.kwargs.foo", "+env.kwargs.foo=1")),
    "OVERRIDE": ("config", ["algo.lrr=1"], ("algo.lrr",)),
    "INVALID_TYPE": ("config", ["env.wrappers=3"], ("int", "ListConfig")),
    "NOT_CONVERTED": ("config", ["algo.lr=abc"], ("abc", "str", "Float")),
    "NOT_VALID": ("config", ["env.normalize_obs=maybe"], ("maybe", "bool", "str")),
    "FULL_KEY": ("config", ["algo.lr=abc"], ("algo.lr",)),
}


def hydra_error(config_name: str, overrides: list[str]) -> BaseException:
    """The error the real Hydra raises composing `overrides`."""
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="rltrain.conf", version_base="1.3"):
            compose(config_name=config_name, overrides=overrides)
    except Exception as exc:  # noqa: BLE001 - any error: its text is what is tested
        return exc
    finally:
        GlobalHydra.instance().clear()
    raise AssertionError(f"Hydra composed {overrides} without an error")


def chain_texts(exc: BaseException | None) -> list[str]:
    """The texts of `exc` and its causes, outermost first (as `overrides.explain` walks them)."""
    texts = []
    while exc is not None:
        texts.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return texts


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pattern_reads_the_real_error(name):
    config_name, overrides, groups = CASES[name]
    pattern = getattr(hydra_texts, name)
    found = [m.groups() for text in chain_texts(hydra_error(config_name, overrides))
             if (m := pattern.search(text)) is not None]
    assert found and found[0] == groups, (name, found)


def test_an_options_error_lists_the_groups_options_one_a_line():
    text = str(hydra_error("config", ["algo=pppo"]))
    options = hydra_texts.OPTION_LINE.findall(text)
    assert {"a2c", "dqn", "ppo", "sac", "td3"} <= set(options), options


def test_a_null_group_choice_reads_as_such():
    assert hydra_texts.GROUP_NOT_STRING in str(hydra_error("config", ["env=null"]))


def test_a_character_the_lexer_stops_at_is_read_with_its_caret():
    override = "hydra.run.dir=/tmp/résumé"
    first, caret = str(hydra_error("config", [override])).splitlines()[:2]
    assert first == hydra_texts.LEXER + override
    assert caret.index("^") - len(hydra_texts.LEXER) == override.index("é")


def test_every_pattern_has_its_real_error():
    names = {n for n in vars(hydra_texts) if n.isupper()}
    tested = {*CASES, "OPTION_LINE", "GROUP_NOT_STRING", "LEXER"}
    assert names == tested


def test_grammar_refusal_reads_the_real_lexer_error():
    """The whole line `rltrain` prints for the real error."""
    exc = hydra_error("config", ["hydra.run.dir=/tmp/résumé"])
    assert grammar_refusal(exc) == (
        "cannot parse hydra.run.dir=/tmp/résumé: Hydra reads 'é' (not ASCII) only inside "
        "quotes; in a shell: 'hydra.run.dir=\"/tmp/résumé\"'")
