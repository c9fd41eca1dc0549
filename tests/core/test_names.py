"""core/names.py, the one check of a name read from data before it is joined to a folder (issue 44
item 1, `pytest -m security`): every hostile spelling of "outside this folder" is refused with the value
shown, and the names the project's writers make pass."""

from __future__ import annotations

import pytest

from core.names import check_file_name, check_sha256

pytestmark = pytest.mark.security

# each leaves the folder, names the folder itself, or is not one plain name on some store or file system
HOSTILE_NAMES = ["../victim", "/etc/passwd", "a/../../x", "..%2F..%2Fx", "%2Fetc%2Fpasswd", "a\\..\\x",
                 "a\x00b", "x\x00", "", ".", "..", ".hidden", "-rf", "a" * 256, "a\nb", "a b", "ä",
                 None, 3, b"abc", ["a"]]  # fmt: skip


@pytest.mark.parametrize("value", HOSTILE_NAMES)
def test_a_hostile_name_is_refused_showing_it(value):
    with pytest.raises(ValueError, match=r"^must be a file name in the folder \(letters.*got ") as e:
        check_file_name(value)
    assert len(str(e.value)) < 300  # a megabyte-long name is shown cut short


@pytest.mark.parametrize(
    "name",
    ["part-00000.parquet", "zero_pp_rank_0_mp_rank_00_optim_states.pt", "trainer_rank0.json", "a" * 255],
)
def test_names_the_writers_make_pass(name):
    assert check_file_name(name) == name


def test_the_suffix_and_the_folder_are_in_the_rule_and_the_message():
    assert check_file_name("part-00001.parquet", ".parquet") == "part-00001.parquet"
    with pytest.raises(ValueError, match=r"in the table's folder ending in \.parquet .*got 'x\.json'"):
        check_file_name("x.json", ".parquet", "the table's folder")


@pytest.mark.parametrize("value", ["../victim", "A" * 64, "a" * 63, "a" * 65, "a" * 64 + "\x00", "", None])
def test_a_sha256_is_64_lowercase_hex_digits(value):
    with pytest.raises(ValueError, match=r"must be 64 lowercase hex digits"):
        check_sha256(value)
    assert check_sha256("0f" * 32) == "0f" * 32
