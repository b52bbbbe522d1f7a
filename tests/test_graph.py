"""The IR refuses bad graphs with messages that name the node, and infers shapes and costs."""

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import graph_passes as P
from mcutrain.graph import Graph, GraphError, Op


def tiny() -> Graph:
    return Graph((8, 8, 3), [
        G.conv2d("c1", G.INPUT, 6, 3, stride=2, padding=1, act="relu", in_channels=3),
        G.conv2d("dw", "c1", 6, 3, padding=1, groups=6, in_channels=6),
        G.add("res", "c1", "dw", act="relu6"),
        G.maxpool("mp", "res", 2),
        G.global_avgpool("gap", "mp"),
        G.flatten("flat", "gap"),
        G.linear("fc", "flat", 5, in_features=6),
    ])


def test_shapes_and_costs_by_hand():
    g = tiny()
    assert g.shape("c1") == (4, 4, 6)
    assert g.shape("dw") == (4, 4, 6)
    assert g.shape("mp") == (2, 2, 6)
    assert g.shape("gap") == (1, 1, 6)
    assert g.shape("flat") == (6,)
    assert g.output_shape == (5,)
    # conv: Ho*Wo*O*kh*kw*I/groups
    assert g.macs(g.node("c1")) == 4 * 4 * 6 * 3 * 3 * 3
    assert g.macs(g.node("dw")) == 4 * 4 * 6 * 3 * 3 * 1
    assert g.macs(g.node("fc")) == 5 * 6
    assert g.num_params(g.node("c1")) == 6 * 3 * 3 * 3 + 6
    assert [n.name for n in g.parametric()] == ["c1", "dw", "fc"]


def test_asymmetric_padding_and_1d_conv():
    g = Graph((1, 40, 2), [G.conv2d("c", G.INPUT, 4, (1, 5), stride=(1, 2), padding=(0, 0, 1, 2),
                                    in_channels=2)])
    assert g.shape("c") == (1, (40 + 3 - 5) // 2 + 1, 4)


@pytest.mark.parametrize("make, needle", [
    (lambda: Graph((8, 8, 3), [G.conv2d("c", G.INPUT, 4, 3, in_channels=2)]), "node 'c'"),
    (lambda: Graph((8, 8, 3), [G.linear("fc", G.INPUT, 4, in_features=3)]), "insert a flatten"),
    (lambda: Graph((8, 8, 3), [G.conv2d("c", "nope", 4, 3, in_channels=3)]), "input 'nope'"),
    (lambda: Graph((4, 4, 3), [G.conv2d("c", G.INPUT, 4, 7, in_channels=3)]), "does not fit"),
    (lambda: Graph((4, 4, 3), [G.conv2d("c", G.INPUT, 4, 1, in_channels=3),
                               G.conv2d("c", "c", 4, 1, in_channels=4)]), "name used twice"),
    (lambda: Graph((4, 4, 3), [G.conv2d("a", G.INPUT, 4, 1, in_channels=3),
                               G.conv2d("b", G.INPUT, 5, 1, in_channels=3),
                               G.add("s", "a", "b")]), "shapes differ"),
    (lambda: Graph((4, 4, 3), [G.conv2d("a", G.INPUT, 4, 1, in_channels=3, act="gelu")]), "act must be"),
    (lambda: Graph((4, 4, 3), [G.Node("x", "softmax", [G.INPUT])]), "unknown op 'softmax'"),
    (lambda: Graph((4, 4, 3), [G.Node("l", Op.SOFTMAX_CE, [G.INPUT])]), "ends at its logits"),
])
def test_bad_graphs_name_the_problem(make, needle):
    with pytest.raises(GraphError, match=needle):
        make()


def test_round_trip_through_dict():
    g = tiny()
    rng = np.random.default_rng(0)
    for n in g.parametric():
        n.params["weight"] = rng.standard_normal(n.params["weight"].shape).astype(np.float32)
    g2 = Graph.from_dict(g.to_dict(), g.arrays())
    assert g2.to_dict() == g.to_dict()
    assert g2.shapes == g.shapes
    for k, v in g.arrays().items():
        np.testing.assert_array_equal(g2.arrays()[k], v)


def test_missing_parameter_array_is_named():
    g = tiny()
    arrays = g.arrays()
    del arrays["fc.bias"]
    with pytest.raises(GraphError, match=r"fc\.bias"):
        Graph.from_dict(g.to_dict(), arrays)


def test_fold_batchnorm_matches_unfolded_math():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 2, 4), rng.standard_normal(4)
    mean, var = rng.standard_normal(4), rng.uniform(0.1, 3, 4)
    g = Graph((3,), [G.linear("fc", G.INPUT, 4, weight=w, bias=b),
                     G.batchnorm("bn", "fc", gamma, beta, mean, var, eps=1e-3),
                     G.relu("r", "bn")])
    folded = P.fold_batchnorm(g)
    assert [n.op for n in folded.nodes] == [Op.LINEAR, Op.RELU]
    assert folded.node("r").inputs == ["fc"]
    x = rng.standard_normal((5, 3))
    expect = gamma * ((x @ w.T + b) - mean) / np.sqrt(var + 1e-3) + beta
    fc = folded.node("fc")
    got = x @ fc.params["weight"].T + fc.params["bias"]
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


def test_fold_batchnorm_refuses_a_shared_producer():
    g = Graph((3,), [G.linear("fc", G.INPUT, 3, in_features=3),
                     G.batchnorm("bn", "fc", np.ones(3), np.zeros(3), np.zeros(3), np.ones(3)),
                     G.add("s", "fc", "bn")])
    with pytest.raises(GraphError, match="feeds other nodes"):
        P.fold_batchnorm(g)


def test_fuse_activations_only_when_sole_consumer():
    g = Graph((4, 4, 2), [G.conv2d("a", G.INPUT, 2, 1, in_channels=2),
                          G.relu("r", "a"),
                          G.conv2d("b", "r", 2, 1, in_channels=2),
                          G.relu6("r6", "b"),
                          G.add("s", "b", "r6")])
    f = P.fuse_activations(g)
    assert f.node("a").act == "relu"
    assert f.node("b").act == "none"  # b also feeds the add, so r6 stays
    assert [n.name for n in f.nodes] == ["a", "b", "r6", "s"]
    assert f.node("b").inputs == ["a"]


HOSTILE_NAMES = ["a*/b", "conv\nint x;", "*/ int x; /*", "n" * 65, "conv\u00e9", "", "1conv",
                 "a b", "a/b", "a\\b", "a??/b", "a\x00b"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_node_names_are_refused_naming_the_node(name):
    with pytest.raises(GraphError) as e:
        Graph((4,), [G.linear(name, "input", 2, in_features=4)])
    msg = str(e.value)
    assert repr(name)[:40] in msg and "letters, digits" in msg
    assert "\n" not in msg                                  # shown escaped, one line


@pytest.mark.parametrize("name", ["a*/b", "", "9model", "m\nx"])
def test_hostile_graph_names_are_refused(name):
    with pytest.raises(GraphError, match="graph name"):
        Graph((4,), [G.linear("fc", "input", 2, in_features=4)], name=name)


def test_names_within_the_rule_build():
    names = ["blocks.0.pw1", "_x", "a-b", "A" * 64, "features.0.Conv"]
    g = Graph((4,), [G.linear(n, "input" if i == 0 else names[i - 1], 4, in_features=4)
                     for i, n in enumerate(names)], name="mcunet-5fps")
    assert [n.name for n in g.nodes] == names
    assert G.name_problem("blocks.0.pw1") is None and G.name_problem(3) == "must be a string, got int"


def test_a_huge_name_is_cut_short_in_the_message():
    with pytest.raises(GraphError) as e:
        Graph((4,), [G.linear("*/" * 10_000, "input", 2, in_features=4)])
    assert len(str(e.value)) < 400
