"""engine.schema.safe_yaml: YAML from outside is refused before it is built when it is too large, stands
for too many values or levels once its aliases are expanded, or holds a recursive alias; ordinary
documents (anchors within the limits included) load exactly as ``yaml.safe_load`` loads them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.schema.safe_yaml import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    YamlLimitError,
    load_yaml,
    load_yaml_file,
)
from tests.yaml_bomb import bomb_run_config, refused_quickly

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted([*ROOT.glob("engine/examples/*.yaml"), *ROOT.glob("docs/examples/*.yaml")])


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_example_loads_as_before(path: Path) -> None:
    assert load_yaml_file(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_anchors_and_merge_keys_within_the_limits_load_as_before() -> None:
    text = ("common: &common {temperature: 0.7, top_k: 50}\n"
            "agents:\n  - {name: a, <<: *common}\n  - {name: b, <<: *common, top_k: 10}\n"
            "tags: &tags [x, y]\nalso: *tags\n")
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["agents"][1] == {"name": "b", "temperature": 0.7, "top_k": 10}


def test_the_alias_bomb_is_refused_before_it_is_built() -> None:
    error = refused_quickly(lambda: load_yaml(bomb_run_config(), source="laughs.yaml"), YamlLimitError,
                            seconds=1.0, peak_mib=8)
    message = str(error)
    assert message.startswith(f"laughs.yaml stands for more than {MAX_YAML_VALUES:,} values once its")
    assert "aliases (*name) are expanded" in message and "write the values out" in message


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlLimitError, match=r"the alias \*loop sits inside .* &loop .*recursive alias"):
        load_yaml("a: &loop {self: *loop}\n")


def test_nesting_beyond_the_depth_limit_is_refused_also_through_aliases() -> None:
    deepest = "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH
    assert load_yaml(deepest) is not None
    with pytest.raises(YamlLimitError, match=f"{MAX_YAML_DEPTH + 1} levels deep .* flatten it"):
        load_yaml("[" + deepest + "]")
    chain = "l0: &l0 [x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, MAX_YAML_DEPTH + 1))
    with pytest.raises(YamlLimitError, match="levels deep \\(aliases expanded\\)"):
        load_yaml(chain)


def test_too_many_values_as_written_are_refused() -> None:
    assert len(load_yaml("[" + "1," * (MAX_YAML_VALUES - 2) + "1]")) == MAX_YAML_VALUES - 1
    with pytest.raises(YamlLimitError, match=f"more than {MAX_YAML_VALUES:,} values as written"):
        load_yaml("[" + "1," * MAX_YAML_VALUES + "1]")


def test_documents_over_the_size_limit_are_refused(tmp_path: Path) -> None:
    big = "note: '" + "x" * MAX_YAML_BYTES + "'\n"
    with pytest.raises(YamlLimitError, match=f"is {len(big):,} bytes, over the limit of {MAX_YAML_BYTES:,}"):
        load_yaml(big)
    with pytest.raises(YamlLimitError, match="over the limit"):  # counted in UTF-8 bytes, not characters
        load_yaml("note: '" + "é" * (MAX_YAML_BYTES // 2 + 1) + "'\n")
    path = tmp_path / "big.yaml"
    path.write_text(big, encoding="utf-8")
    with pytest.raises(YamlLimitError, match=f"{path} is {len(big):,} bytes"):
        load_yaml_file(path)


def test_a_number_beyond_pythons_digit_limit_is_a_yaml_error_not_a_crash() -> None:
    with pytest.raises(YamlLimitError, match="a value cannot be read"):
        load_yaml("seed: " + "1" * 5000)


def test_syntax_errors_keep_the_line_excerpt() -> None:
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml("agents: [unclosed\ntask: x\n")
    assert not isinstance(caught.value, YamlLimitError)
    assert "line 1, column 9" in str(caught.value) and "^" in str(caught.value)
