"""companion.model: presets against their papers, parameter counts, layout validation."""
import pytest

from companion import model as md
from companion.model import Layout, Transformer, check_layout, preset


@pytest.mark.parametrize("name, layers, hidden, heads", [
    # Korthikanti et al. 2022 (arXiv:2205.05198), Table 3; s = 2048, v = 51200 (Section 6)
    ("korthikanti-22b", 48, 6144, 64),
    ("korthikanti-175b", 96, 12288, 96),
    ("korthikanti-530b", 105, 20480, 128),
    ("korthikanti-1t", 128, 25600, 160),
])
def test_korthikanti_table3_configs(name, layers, hidden, heads):
    m = preset(name)
    assert (m.layers, m.hidden, m.heads, m.seq_len, m.vocab) == (layers, hidden, heads, 2048, 51200)
    assert m.ffn_hidden == 4 * hidden  # Section 3: the MLP widens to 4h


@pytest.mark.parametrize("size, billions", [
    # Narayanan et al. 2021 (arXiv:2104.04473), Table 1, "Number of parameters (billion)";
    # the paper counts P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) (Section 5.1).
    ("1.7b", 1.7), ("3.6b", 3.6), ("7.5b", 7.5), ("18b", 18.4), ("39b", 39.1), ("76b", 76.1),
    ("145b", 145.6), ("310b", 310.1), ("530b", 529.6), ("1t", 1008.0),
])
def test_narayanan_table1_parameter_counts(size, billions):
    m = preset(f"narayanan-{size}")
    assert round(m.params / 1e9, 1) == billions
    l, h = m.layers, m.hidden
    formula = 12 * l * h * h * (1 + 13 / (12 * h) + (m.vocab + m.seq_len) / (12 * l * h))
    # our count adds only the final LayerNorm (2h) to the paper's formula
    assert m.params - formula == pytest.approx(2 * h, abs=1)


@pytest.mark.parametrize("name, digits, billions", [
    # Llama 3 Herd of Models (arXiv:2407.21783) Table 3 shapes; the released checkpoints'
    # Hugging Face model cards show "8.03B", "70.6B" and "406B" params
    ("llama3-8b", 2, 8.03), ("llama3-70b", 1, 70.6), ("llama3-405b", 0, 406),
])
def test_llama3_parameter_counts(name, digits, billions):
    assert round(preset(name).params / 1e9, digits) == billions


def test_gpt3_and_turing_presets():
    g = preset("gpt3-175b")  # Brown et al. 2020, Table 2.1: 96 layers, 12288, 96 heads
    assert (g.layers, g.hidden, g.heads, g.head_dim, g.seq_len) == (96, 12288, 96, 128, 2048)
    t = preset("turing-530b")  # Smith et al. 2022: 105 layers, 20480, 128 heads
    assert (t.layers, t.hidden, t.heads) == (105, 20480, 128)
    assert round(t.params / 1e9) == 530


def test_names_are_forgiving_and_unknown_names_suggest():
    assert preset("GPT-3 175B") is preset("gpt3_175b") is preset("gpt3-175b")
    assert preset("Llama3-70B").hidden == 8192
    with pytest.raises(ValueError, match="llama3-70b"):
        preset("llama-70b")
    with pytest.raises(TypeError, match="string"):
        preset(175)
    assert len(md.presets()) == len(md.PRESET_SOURCES) >= 19


def test_overrides_and_derived_properties():
    m = preset("llama3-8b", seq_len=4096)
    assert m.seq_len == 4096 and m.head_dim == 128 and m.kv_heads_used == 8
    assert not m.is_moe and m.active_params == m.params


def test_moe_counts():
    # Mixtral 8x7B: 32 layers, 4096 hidden, 32 heads, 8 KV heads, 8 experts of width 14336,
    # top-2, vocab 32000 (Jiang et al. 2024, arXiv:2401.04088, Table 1). Mistral AI's
    # announcement ("Mixtral of experts", mistral.ai/news/mixtral-of-experts): "46.7B total
    # parameters but only uses 12.9B parameters per token"
    m = Transformer("mixtral", 32, 4096, 32, 14336, 32000, 4096, kv_heads=8, ffn_type="swiglu",
                    experts=8, top_k=2, tied_embeddings=False, bias=False,
                    learned_positions=False)
    assert m.params / 1e9 == pytest.approx(46.7, abs=0.05)
    assert m.active_params / 1e9 == pytest.approx(12.9, abs=0.05)
    assert m.moe_layers == 32 and m.routed_expert_params == 32 * 8 * m.expert_params


@pytest.mark.parametrize("kwargs, match", [
    (dict(layers=0), "layers"),
    (dict(hidden=-8), "hidden"),
    (dict(heads=7), "heads=7 must divide hidden"),
    (dict(kv_heads=3), "kv_heads=3 must divide heads"),
    (dict(ffn_type="relu"), "ffn_type"),
    (dict(experts=4, top_k=8), "top_k"),
    (dict(dense_layers=2), "MoE"),
])
def test_transformer_rejects_bad_shapes(kwargs, match):
    base = dict(name="x", layers=4, hidden=64, heads=8, ffn_hidden=256, vocab=100, seq_len=32)
    base.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        Transformer(**base)


def test_layout_basics():
    lay = Layout(tp=8, pp=8, dp=4, global_batch=512, microbatch=2)
    assert lay.num_gpus == 256 and lay.num_microbatches == 64
    assert Layout(dp=8, cp=2, ep=4).expert_optimizer_shards == 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(tp=0), "tp"),
    (dict(recompute="some"), "recompute"),
    (dict(precision="fp12"), "precision"),
    (dict(zero_stage=4), "zero_stage"),
    (dict(vpp=2), "vpp"),
    (dict(dp=2, ep=4), "ep=4 must divide dp"),
    (dict(dp=2, microbatch=2, global_batch=6), "global_batch"),
    (dict(distributed_optimizer=True, zero_stage=3), "distributed_optimizer"),
    (dict(sequence_parallel=1), "sequence_parallel"),
])
def test_layout_rejects_bad_values(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Layout(**kwargs)


def test_check_layout_names_the_parameters():
    m = preset("korthikanti-22b")  # 64 heads, 48 layers
    check_layout(m, Layout(tp=8), num_gpus=8)
    with pytest.raises(ValueError, match="tp=3 must divide heads=64"):
        check_layout(m, Layout(tp=3))
    with pytest.raises(ValueError, match="pp \\* vpp=10 must divide layers=48"):
        check_layout(m, Layout(pp=5, vpp=2))
    with pytest.raises(ValueError, match="num_gpus=16"):
        check_layout(m, Layout(tp=8), num_gpus=16)
    with pytest.raises(ValueError, match="MoE"):
        check_layout(m, Layout(dp=2, ep=2))


def test_deepseek_v3_and_seed_presets():
    # DeepSeek-V3 Technical Report (arXiv:2412.19437), Section 4.2: 671B total, 37B activated;
    # MLA priced as MHA of equal width adds about 1B (total) and 1.7B (active)
    ds = preset("deepseek-v3")
    assert ds.params / 1e9 == pytest.approx(671, rel=0.01)
    assert ds.active_params / 1e9 == pytest.approx(37, rel=0.06)
    assert (ds.experts, ds.top_k, ds.shared_experts, ds.dense_layers) == (256, 8, 1, 3)
    # seed 003: "总参数1.7万亿，每次激活大约400B" (1.7T total, about 400B active)
    moe = preset("seed-1.7t-moe")
    assert moe.params / 1e12 == pytest.approx(1.7, rel=0.03)
    assert moe.active_params / 1e9 == pytest.approx(400, rel=0.02)
    # the seed's layout TP4 / PP8 x VPP2 / EP128 divides heads, layers and experts
    assert moe.heads % 4 == 0 and moe.layers % 16 == 0 and moe.experts % 128 == 0
    assert preset("seed-13b").hidden == 5120  # seed 000: "hidden size 5120"
    assert round(preset("seed-13b").params / 1e9) == 13
    assert preset("seed-175b").layers == 96 and round(preset("seed-175b").params / 1e9) == 175


def test_integral_floats_are_stored_as_ints_and_absurd_sizes_are_refused():
    # a layout read from a CSV or JSON may carry 2.0; it names TP 2 and must print so
    from companion.model import MAX_DIM, Layout, layout_text, preset
    lay = Layout(tp=2.0, dp=4.0, global_batch=8.0)
    assert layout_text(lay) == "TP2 PP1 DP4 mb1" and isinstance(lay.global_batch, int)
    assert isinstance(preset("llama3-8b", hidden=4096.0).hidden, int)
    # a hidden of 2**40 used to overflow int64 deep in the memory model
    with pytest.raises(ValueError, match=f"hidden must be <= {MAX_DIM}"):
        preset("llama3-8b", hidden=2 ** 40)
