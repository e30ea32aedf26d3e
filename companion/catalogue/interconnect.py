"""Exercises of the interconnect chapter (NVLink and InfiniBand)."""
import dataclasses

from .. import comm, fabric, hardware
from ..exercises import Exercise, register

CHAPTER = "interconnect"


def _ic():
    # Imported on demand: the explore package loads altair, which checking an answer never needs.
    from ..explore import interconnect
    return interconnect


register(Exercise(
    id="ic-nvlink4-per-direction",
    chapter=CHAPTER,
    question="The H100 datasheet prints 900 GB/s of NVLink bandwidth. How many GB/s can one "
             "H100 send to its peers while it receives as much?",
    answer=lambda: hardware.gpu("H100").scaleup_Bps / 1e9,
    why="900 GB/s is the sum of both directions (18 links x 25 GB/s each way x 2); one "
        "direction is half of it, and that is the number bus bandwidth is compared with.",
    rel_tol=0.01, unit="GB/s"))

register(Exercise(
    id="ic-ring-1gib-h100",
    chapter=CHAPTER,
    question="Ignoring latency, how many milliseconds does a ring all-reduce of a 1 GiB buffer "
             "take on 8 H100s over NVLink 4?",
    answer=lambda: comm.collective_time_s("all_reduce", 2 ** 30, 8,
                                          hardware.gpu("H100").scaleup_Bps, 0.0) * 1e3,
    why="t = 2(n-1)/n x S / B with B the per-direction bandwidth (450 GB/s), not 900.",
    rel_tol=0.02, unit="ms"))

register(Exercise(
    id="ic-busbw-issue212",
    chapter=CHAPTER,
    question="nccl-tests reports an all-reduce algbw of 275 GB/s on 8 H100s (nccl-tests issue "
             "212). What busbw does it print next to it, in GB/s?",
    answer=lambda: comm.bus_bandwidth("all_reduce", _ic().PUBLISHED_H100_NVLS["algbw_Bps"],
                                      _ic().PUBLISHED_H100_NVLS["gpus"], 1.0) / 1e9,
    why="busbw = algbw x 2(n-1)/n for all-reduce, whatever algorithm NCCL used; with NVLS it "
        "can exceed the 450 GB/s line rate.",
    rel_tol=0.01, unit="GB/s"))

def _seed_dp():
    """The seed's 2,000 GPUs as 250 DGX B200 nodes with NDR NICs (the chapter's fabric)."""
    return _ic().bucket_fabric("NDR", "DGX B200"), 250


def eight_byte_ring_ms() -> float:
    """An 8-byte ring all-reduce over the seed's 2,000 GPUs, priced as NCCL prices it."""
    f, d = _seed_dp()
    return fabric.flat_all_reduce_time_s(8, f, d, "ring") * 1e3


register(Exercise(
    id="ic-8byte-ring-2000",
    chapter=CHAPTER,
    question="An 8-byte all-reduce runs as a ring over 2,000 GPUs in 250 DGX B200 nodes. NCCL's "
             "tuning model prices the 2(nodes - 1) ring steps that cross the network at 4 us "
             "and the other steps, over NVLink, at 1.9 us. How many milliseconds does it take?",
    answer=eight_byte_ring_ms,
    why="2(n-1) = 3,998 steps, 498 of them across nodes: 3,500 x 1.9 us + 498 x 4 us; the "
        "bandwidth term of 8 bytes is negligible. NCCL's tree needs 2((g-1) t_nvl + "
        "floor(log2 nodes) t_net) instead.",
    rel_tol=0.02, unit="ms"))

register(Exercise(
    id="ic-tp16-cross-node",
    chapter=CHAPTER,
    question="A TP-16 ring all-reduce of a large activation runs across two DGX B200 nodes "
             "(NVLink 5 at 900 GB/s per direction, eight 400 Gb/s NICs per node) instead of "
             "inside one 72-GPU NVLink domain. Ignoring latency, how many times longer does it "
             "take?",
    answer=lambda: fabric.cross_domain_ring_slowdown(
        dataclasses.replace(_ic().system_fabric("DGX B200"), scaleup_latency_s=0.0,
                            net_latency_s=0.0), 1e9, 16),
    why="NCCL spreads the ring's channels over all eight rails, so each node's 8 x 50 GB/s = "
        "400 GB/s serve every GPU's ring traffic: 900 / 400 = 2.25 times, not the 18 times of "
        "one 50 GB/s NIC against NVLink; latency adds 2 network steps on top.",
    rel_tol=0.02, unit="x"))

register(Exercise(
    id="ic-hdr-leaf-factor",
    chapter=CHAPTER,
    question="2,000 GPUs in DGX B200 nodes (one 400 Gb/s NIC per GPU) all-reduce 26 GB of "
             "gradients hierarchically. One of the job's leaves is HDR. By what factor does the "
             "network phase grow compared with an all-NDR fabric?",
    answer=lambda: (fabric.hierarchical_all_reduce_time_s(
        26e9, _ic().system_fabric("DGX B200", slow_leaf_fraction=0.125, slow_link="HDR"),
        250).scaleout_s / fabric.hierarchical_all_reduce_time_s(
        26e9, _ic().system_fabric("DGX B200"), 250).scaleout_s),
    why="Every ring passes through the slow leaf, so the ring runs at the HDR rate (25 GB/s "
        "per direction instead of 50): almost exactly 2x, the latency terms being small.",
    rel_tol=0.03, unit="x"))

register(Exercise(
    id="ic-slow-leaf-probability",
    chapter=CHAPTER,
    question="A rail-optimized job of 250 DGX B200 nodes puts each node's 8 NICs on 8 rails, "
             "and a rail's leaf switch takes 32 nodes. One leaf in 8 of the building is still "
             "HDR, placed at random. What is the probability that the job touches no HDR leaf?",
    answer=lambda: 1 - fabric.slow_leaf_probability(
        1 / 8, fabric.job_leaves(_ic().system_fabric("DGX B200"), 250)),
    why="ceil(250 / 32) = 8 leaves on each of 8 rails: k = 64 leaves, and (1 - 1/8)^64 is "
        "about 2 in 10,000. Counting only one rail's 8 leaves would give 34%.",
    rel_tol=0.02, unit=""))

register(Exercise(
    id="ic-tp-share-h100",
    chapter=CHAPTER,
    question="With the chapter's assumptions (13B layer, hidden 5120, 40 heads, sequence 4096, "
             "microbatch 1, TP 8, ring all-reduce at the registry's NVLink bandwidth plus "
             "NCCL's 1.9 us per ring step, GEMMs at their roofline with tile and wave "
             "quantization, no overlap), what share of an H100 layer's time is TP all-reduce?",
    answer=lambda: _ic().tp_layer("H100").comm_share,
    why="Four ring all-reduces of b s h bf16 values per layer (two forward, two backward), "
        "each 2(n-1)/n S / B plus 2(n-1) steps of NCCL's latency, against 72 b s h^2 + "
        "12 b s^2 h FLOPs split over 8 GPUs at the quantized roofline (the chapter's "
        "assumptions table). Leaving out the latency or the quantization moves the share by "
        "5-15%; 900 GB/s instead of 450 roughly halves the all-reduce time.",
    rel_tol=0.03, unit=""))
