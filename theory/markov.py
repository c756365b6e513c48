"""Finite Markov chains: stationary law by GTH elimination, communicating classes, period.

Definitions (for a transition matrix P on states 0..m-1):

* ``j`` is *accessible* from ``i`` if ``P^k[i, j] > 0`` for some k >= 0; ``i`` and ``j``
  *communicate* if each is accessible from the other. The classes of this equivalence are the
  strongly connected components of the directed graph with an edge ``i -> j`` where
  ``P[i, j] > 0``.
* A class is *recurrent* (closed) if no edge leaves it, i.e. it is a sink of the condensation
  (the DAG of classes); other classes are transient. A finite chain has at least one recurrent
  class, and each carries exactly one stationary law; every stationary law mixes these.
* The *period* of a class is the gcd of the lengths of its cycles; with BFS levels ``l`` from
  any state of the class it is ``gcd{l(u) + 1 - l(v) : u -> v inside the class}``. Aperiodic
  means period 1.

The stationary law of an irreducible chain is computed by Grassmann-Taksar-Heyman (GTH)
elimination: state elimination in which every pivot is a sum of off-diagonal probabilities, so no
subtraction ever happens and the result is accurate to rounding even when the chain is nearly
decomposable.

References
----------
Grassmann, Taksar, Heyman (1985), Operations Research 33(5); Bari, Hegde, de Veciana (2025),
Appendix C (positive recurrence of the cycle chain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
from numba import njit

from theory.errors import FieldError


@njit(cache=True)
def _gth(A, x):
    """GTH elimination of states m-1..1 in place, then back-substitution into ``x``.

    Returns False on a zero pivot (a state that cannot reach the states below it)."""
    m = A.shape[0]
    for k in range(m - 1, 0, -1):
        s = 0.0
        for j in range(k):
            s += A[k, j]
        if s <= 0.0:
            return False
        for i in range(k):
            A[i, k] /= s
        for i in range(k):
            a = A[i, k]
            if a != 0.0:
                for j in range(k):
                    A[i, j] += a * A[k, j]
    x[0] = 1.0
    for k in range(1, m):
        acc = 0.0
        for i in range(k):
            acc += x[i] * A[i, k]
        x[k] = acc
    return True


def gth_solve(P: np.ndarray) -> np.ndarray:
    """Stationary law ``pi`` (``pi P = pi``, ``sum pi = 1``) of an irreducible stochastic matrix.

    Parameters
    ----------
    P : ndarray, shape (m, m)
        Row-stochastic and irreducible.

    Raises
    ------
    FieldError
        If ``P`` is not square and non-negative, or the elimination meets a zero pivot (``P`` is
        reducible).

    References
    ----------
    Grassmann, Taksar, Heyman (1985).
    """
    A = np.array(P, dtype=np.float64, order="C", copy=True)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0 or np.any(A < 0):
        raise FieldError("P", A.shape, "a non-empty square non-negative matrix")
    x = np.zeros(A.shape[0])
    if not _gth(A, x):
        raise FieldError("P", "reducible", "an irreducible matrix (use stationary_laws)")
    return x / x.sum()


@dataclass(frozen=True)
class ChainStructure:
    """Communicating classes of a finite chain.

    Attributes
    ----------
    classes : list of ndarray
        Every communicating class (sorted states), recurrent ones first.
    recurrent : list of ndarray
        The closed classes (sinks of the condensation).
    periods : list of int
        Period of each recurrent class.
    transient : ndarray
        States outside every recurrent class.
    """

    classes: list
    recurrent: list
    periods: list
    transient: np.ndarray

    @property
    def irreducible(self) -> bool:
        return len(self.classes) == 1

    @property
    def aperiodic(self) -> bool:
        return all(p == 1 for p in self.periods)


def transition_graph(P: np.ndarray) -> nx.DiGraph:
    """The directed graph with an edge ``i -> j`` wherever ``P[i, j] > 0``."""
    g = nx.DiGraph()
    g.add_nodes_from(range(P.shape[0]))
    rows, cols = np.nonzero(P > 0)
    g.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    return g


def period(g: nx.DiGraph, states) -> int:
    """Period of the strongly connected set ``states`` of ``g`` (gcd of BFS level differences)."""
    sub = g.subgraph(states)
    root = next(iter(sub.nodes))
    level = nx.single_source_shortest_path_length(sub, root)
    d = 0
    for u, v in sub.edges:
        d = math.gcd(d, level[u] + 1 - level[v])
    return abs(d) if d else 1


def structure(P: np.ndarray) -> ChainStructure:
    """Communicating classes, recurrent classes and their periods (networkx).

    References
    ----------
    See the module docstring.
    """
    g = transition_graph(np.asarray(P))
    comps = [np.array(sorted(c)) for c in nx.strongly_connected_components(g)]
    cond = nx.condensation(g, scc=[set(c.tolist()) for c in comps])
    sinks = [k for k in cond.nodes if cond.out_degree(k) == 0]
    recurrent = sorted((comps[k] for k in sinks), key=lambda c: int(c[0]))
    periods = [1 if nx.is_aperiodic(g.subgraph(c.tolist())) else period(g, c.tolist())
               for c in recurrent]
    others = sorted((comps[k] for k in cond.nodes if k not in sinks), key=lambda c: int(c[0]))
    transient = np.concatenate(others) if others else np.zeros(0, dtype=int)
    return ChainStructure([*recurrent, *others], recurrent, periods, np.sort(transient))


def stationary_laws(P: np.ndarray) -> tuple[list[np.ndarray], ChainStructure]:
    """One stationary law per recurrent class (each a full-length vector supported on its class).

    References
    ----------
    See the module docstring; GTH on each closed class.
    """
    P = np.asarray(P, dtype=float)
    s = structure(P)
    laws = []
    for c in s.recurrent:
        pi = np.zeros(P.shape[0])
        pi[c] = gth_solve(P[np.ix_(c, c)])
        laws.append(pi)
    return laws, s
