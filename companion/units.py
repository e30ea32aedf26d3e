"""Units and conversions: the small arithmetic that spec sheets get wrong.

Everything inside the companion is SI: bytes, seconds, FLOP/s, bytes/s, watts. These helpers
turn what a datasheet prints ("80 GB", "400 Gb/s", "900 GB/s bidirectional", "1,979 TFLOPS
with sparsity") into those units, one convention per function, so that the convention is
named wherever it is used.

Three traps they exist for:

- Decimal and binary prefixes: a GB is 10**9 bytes, a GiB is 2**30, here and in every chapter
  (:data:`BYTE_CONVENTION`). HBM is built from binary-sized dies, so the registry reads a
  vendor's memory "80 GB" as 80 GiB; the driver then shows a little less (81,559 MiB on an
  H100), and memory fit is checked against that visible figure.
- Bits and bytes, and line rate versus data rate: network ports are quoted in Gb/s (bits),
  per direction; a 400 Gb/s port moves at most 50 GB/s each way.
- Bidirectional totals: NVLink and PCIe are usually quoted as the sum of both directions
  (H100: "900 GB/s" is 450 GB/s each way); a transfer in one direction sees half.
"""
from __future__ import annotations

from companion.checks import number, scaled

# Decimal (SI) prefixes, as storage and network vendors use them.
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
PB = 1e15

# Binary prefixes (IEC), as memory sizes really are.
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

#: The one byte convention of the book and the companion, stated once and glued everywhere.
BYTE_CONVENTION = ("GB = 10^9 bytes and GiB = 2^30 bytes (MiB = 2^20) everywhere; a vendor's "
                   "memory \"80 GB\" is read as 80 GiB (HBM is binary-sized), and memory fit is "
                   "checked against what the driver shows (nvidia-smi: 81,559 MiB on an H100)")

GIGA = 1e9
TERA = 1e12
PETA = 1e15
EXA = 1e18

BITS_PER_BYTE = 8

# Line-code efficiencies: the fraction of signalled bits that carry data.
ENCODING_8B10B = 8 / 10        # PCIe 1-2, older Ethernet
ENCODING_128B130B = 128 / 130  # PCIe 3-5
ENCODING_64B66B = 64 / 66      # Ethernet 10G and up, InfiniBand FDR and later

# NVIDIA and AMD datasheets print tensor peaks with 2:4 structured sparsity at twice the dense
# rate; Blackwell Ultra's FP4 is the documented exception (see companion.hardware).
SPARSITY_2_4 = 2.0


def gb(x):
    """Decimal gigabytes to bytes: ``gb(80) == 80e9``."""
    return scaled("x", x, GB)


def gib(x):
    """Binary gibibytes to bytes: ``gib(80) == 80 * 2**30`` (about 85.9e9)."""
    return scaled("x", x, GiB)


def tb(x):
    """Decimal terabytes to bytes."""
    return scaled("x", x, TB)


def tib(x):
    """Binary tebibytes to bytes."""
    return scaled("x", x, TiB)


def mib(x):
    """Binary mebibytes to bytes, as ``nvidia-smi`` prints memory: ``mib(81559)`` is an H100's
    driver-visible total, 85.5e9 bytes."""
    return scaled("x", x, MiB)


def to_mib(n_bytes):
    """Bytes to binary mebibytes."""
    return number("n_bytes", n_bytes, nonnegative=True) / MiB


def to_gb(n_bytes):
    """Bytes to decimal gigabytes."""
    return number("n_bytes", n_bytes, nonnegative=True) / GB


def to_gib(n_bytes):
    """Bytes to binary gibibytes."""
    return number("n_bytes", n_bytes, nonnegative=True) / GiB


def to_tb(n_bytes):
    """Bytes to decimal terabytes."""
    return number("n_bytes", n_bytes, nonnegative=True) / TB


def gbit_per_s(x):
    """A rate in gigabits per second (as network ports are quoted) to bytes per second.

    ``gbit_per_s(400) == 50e9``: a 400 Gb/s InfiniBand NDR port moves 50 GB/s each way.
    """
    return scaled("x", x, GIGA / BITS_PER_BYTE)


def to_gbit_per_s(Bps):
    """Bytes per second to gigabits per second."""
    return scaled("Bps", Bps, BITS_PER_BYTE / GIGA)


def line_rate_Bps(gbit_per_s_signalled, efficiency=1.0):
    """Data rate in bytes/s of a link signalling ``gbit_per_s_signalled`` Gb/s.

    ``efficiency`` is the line-code fraction, e.g. ``ENCODING_128B130B`` for PCIe 5.0:
    ``line_rate_Bps(32 * 16, ENCODING_128B130B)`` is 63.0e9 for an x16 link, per direction.
    Protocol headers (PCIe TLPs, NCCL framing) cost more on top and are not included.
    """
    eff = number("efficiency", efficiency, positive=True, maximum=1.0)
    return scaled("gbit_per_s_signalled", gbit_per_s_signalled, GIGA / BITS_PER_BYTE * eff)


def gb_per_s(x):
    """Decimal GB/s to bytes per second."""
    return scaled("x", x, GB)


def tb_per_s(x):
    """Decimal TB/s to bytes per second: ``tb_per_s(3.35)`` is an H100's HBM3."""
    return scaled("x", x, TB)


def per_direction(bidirectional_Bps):
    """Per-direction bandwidth from a bidirectional (both directions summed) figure.

    ``per_direction(900e9) == 450e9``: an H100's "900 GB/s" NVLink is 450 GB/s each way.
    """
    return number("bidirectional_Bps", bidirectional_Bps, nonnegative=True) / 2


def bidirectional(per_direction_Bps):
    """Bidirectional total from a per-direction bandwidth (the way NVLink is marketed)."""
    return scaled("per_direction_Bps", per_direction_Bps, 2)


def tflops(x):
    """TFLOP/s to FLOP/s: ``tflops(989.4) == 989.4e12``."""
    return scaled("x", x, TERA)


def pflops(x):
    """PFLOP/s to FLOP/s: ``pflops(2.25) == 2.25e15``."""
    return scaled("x", x, PETA)


def to_tflops(flops):
    """FLOP/s to TFLOP/s."""
    return number("flops", flops, nonnegative=True) / TERA


def to_pflops(flops):
    """FLOP/s to PFLOP/s."""
    return number("flops", flops, nonnegative=True) / PETA


def dense_from_sparse(sparse_flops, factor=SPARSITY_2_4):
    """The dense peak behind a "with sparsity" headline.

    ``dense_from_sparse(1979e12)`` is about 989.5e12: the H100 datasheet's 1,979 TFLOPS BF16
    is the 2:4-sparse figure. Pass ``factor`` where a vendor documents another ratio (GB300's
    FP4: 20 PF sparse over 15 PF dense, a factor of 4/3).
    """
    flops = number("sparse_flops", sparse_flops, nonnegative=True)
    return flops / number("factor", factor, positive=True, minimum=1.0)


_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si(value, unit, digits=3):
    """Format a value with an SI prefix: ``si(989.4e12, "FLOP/s") == "989 TFLOP/s"``.

    ``digits`` is the number of significant digits. Decimal prefixes only: use ``to_gib`` for
    binary sizes.
    """
    v = number("value", value)
    number("digits", digits, integer=True, minimum=1)
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a string; got {type(unit).__name__}")
    # the prefix of the value as printed: 999.96e9 B rounds to 1 TB, not to "1e+03 GB"
    r = float(f"{v:.{digits}g}")
    scale, prefix = next(((s, p) for s, p in _PREFIXES if abs(r) >= s), (1.0, ""))
    m = f"{r / scale:.{digits}g}"
    if "e" in m and abs(r / scale) >= 1:  # more integer digits than asked: 150 GB, not 1.5e+02
        m = f"{r / scale:.0f}"
    return f"{m} {prefix}{unit}"
