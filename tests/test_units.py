"""Sizes as people type them (nccl-tests' convention: a bare K, M, G is binary) and as pkroof prints them."""

import pytest

from pkroof.analysis.catalogue import parse_params
from pkroof.analysis.params import coerce
from pkroof.rooflines.units import fmt_bytes, parse_size

KiB, MiB, GiB, TiB, PiB = (1024**i for i in range(1, 6))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("1e9", 10**9),
        ("64M", 64 * MiB),  # nccl-tests: `-b 64M` is 64 MiB
        ("64m", 64 * MiB),
        ("256K", 256 * KiB),
        ("1G", GiB),
        ("2T", 2 * TiB),
        ("1P", PiB),
        ("1.5K", 1536),
        ("64MiB", 64 * MiB),
        ("1TiB", TiB),
        ("1PiB", PiB),
        ("64MB", 64 * 10**6),  # with the B: SI
        ("1GB", 10**9),
        ("1PB", 10**15),
        ("99999999999999999999", 99999999999999999999),  # exact, however many digits
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lots", "cannot read size 'lots'"),
        ("1EiB", "cannot read size '1EiB'"),
        ("0", "must be at least 1 byte"),
        ("-8", "size '-8' must be positive"),
        ("0.5", "not a whole number of bytes"),
        ("1e400", "too large"),
    ],
)
def test_parse_size_refuses(text, expected):
    with pytest.raises(ValueError, match=expected):
        parse_size(text)


@pytest.mark.parametrize(
    ("n", "expected"),
    [(512, "512 B"), (64 * MiB, "64 MiB"), (1.5 * GiB, "1.5 GiB"), (TiB, "1 TiB"), (3 * PiB, "3 PiB")],
)
def test_fmt_bytes(n, expected):
    assert fmt_bytes(n) == expected


def test_params_keep_their_text_and_only_byte_sizes_take_units():
    assert parse_params(["m=8192", "size_bytes=64MiB", "size=1M", "bucket_bytes=1K", "dtype=bf16"]) == {
        "m": "8192",
        "size_bytes": 64 * MiB,
        "size": MiB,
        "bucket_bytes": KiB,
        "dtype": "bf16",
    }


@pytest.mark.parametrize("bad", ["0", "-8", "64KiB", "4K", "1e3", "2.5", ""])
def test_a_count_is_a_positive_integer_in_plain_digits(bad):
    with pytest.raises(ValueError, match="must be a positive integer in plain digits"):
        coerce("k", bad, 4096)
