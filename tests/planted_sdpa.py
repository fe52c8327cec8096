"""Ordering plants in the shared warp-specialized kernel (kernels/sdpa/mainloop/ and its producer, s6-s18),
issue 28: each a small edit of one exact passage, applied to a scratch copy of the checkout
(make_sdpa_plant_checkout), so the repository's headers, and every stage's default SASS, stay
as they are. An edit whose passage is gone (the header was rewritten) fails loudly: re-anchor it.

- k_release_early: the first tile's consumer releases its K slot right after issuing the wgmma
  that reads it, before wgmma_wait<0> (the producer may refill the slot while the wgmma runs).
  The same move in middle_tile is harmless by the protocol: the producer's next load into that
  K slot comes after its V load for the tile before, which waits for this warpgroup's release
  of the previous V slot, itself after wgmma_wait<0>, which also covers S.
- pv_no_final_wait: the last P.V's wgmma_wait<0> removed, so its V slot is released while the
  wgmma may be in flight.
- no_k_full_wait: the consumers' wait for a K tile to land removed. The issue's author saw the
  check hang; on an H100 at 77fb757 the kernel instead died ("unspecified launch failure": the
  consumers run ahead over slots the producer has not filled), so it is not a reliable hang.
- k_tile_never_issued: the producer skips the second key tile's K load of every work item (its
  expect_tx and its TMA boxes), so that tile's full barrier never completes its phase: the
  consumers wait on it forever, and the producer in turn on their release of that slot. A hang
  on every launch whose items have two key tiles or more (every check shape but one-tile ones):
  the evidence for the watchdog's `hang` verdict.

The protocol plants (issue 46) live in tests/fixtures/planted/protocol/, one YAML file each: the
passage, its planted edit, and the stage whose protocol step must name the rule and the ring
(PROTOCOL_PLANTS, ProtocolPlant). make_sdpa_plant_checkout takes either kind by name.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from stagelab.core.paths import repo_root

CONSUMER = "mainloop/consumer.cuh"
WARPGROUP = "mainloop/warpgroup.cuh"
PRODUCER = "mainloop/producer.cuh"


@dataclass(frozen=True)
class Plant:
    name: str
    header: str
    passage: str
    planted: str
    what: str


PLANTS = {plant.name: plant for plant in (
    Plant("k_release_early", CONSUMER,
          """    commit();
    turn_end();
    store_deferred();  // under this Q.K^T and the other warpgroup's turn
    wait_all_wgmma();
    fence_regs(tile.s_acc);
    release_kv(kEmptyK, ring);
""",
          """    commit();
    release_kv(kEmptyK, ring);  // PLANTED: before the wgmma reading K completes
    turn_end();
    store_deferred();  // under this Q.K^T and the other warpgroup's turn
    wait_all_wgmma();
    fence_regs(tile.s_acc);
""",
          "the first tile's K slot released before the wgmma reading it completes"),
    Plant("pv_no_final_wait", CONSUMER,
          """    turn_end();
    wait_all_wgmma();
    fence_regs(tile.o_acc);
    tile.pv_retired();
    release_kv(kEmptyV, idx);
""",
          """    turn_end();
    fence_regs(tile.o_acc);  // PLANTED: no wgmma_wait<0> before the V slot's release
    tile.pv_retired();
    release_kv(kEmptyV, idx);
""",
          "the last P.V's wgmma_wait<0> removed: its V slot released with the wgmma in flight"),
    Plant("no_k_full_wait", WARPGROUP,
          """  __device__ __forceinline__ void wait_full(int ring, int index) const {
    mbarrier_wait(ring_bar<kStages>(bars, ring, index), ring_parity<kStages>(index));
    protocol.landed(ring == kFullK ? sdpa_protocol::kRingK : sdpa_protocol::kRingV, index);
""",
          """  __device__ __forceinline__ void wait_full(int ring, int index) const {
    if (ring != kFullK) mbarrier_wait(ring_bar<kStages>(bars, ring, index), ring_parity<kStages>(index));  // PLANTED
    protocol.landed(ring == kFullK ? sdpa_protocol::kRingK : sdpa_protocol::kRingV, index);
""",
          "the consumers' K-ring wait_full removed"),
    Plant("k_tile_never_issued", PRODUCER,
          """      protocol.filled(sdpa_protocol::kRingK, ring);
      load_kv_tile<Cfg, kBlocks, L::kRowBytes>(s_base + L::kKOffset + slot, &prm.k_map, ring_bar<kStages>(bars, kFullK, ring),
""",
          """      protocol.filled(sdpa_protocol::kRingK, ring);
      if (n != wt.kt_begin + 1)  // PLANTED: the item's second K tile is never issued (a deterministic hang)
      load_kv_tile<Cfg, kBlocks, L::kRowBytes>(s_base + L::kKOffset + slot, &prm.k_map, ring_bar<kStages>(bars, kFullK, ring),
""",
          "the producer never issues a work item's second K tile: its full barrier never completes"),
)}


@dataclass(frozen=True)
class ProtocolPlant(Plant):
    stage: str = ""
    rule: str = ""  # the rule the protocol step's report must name (instrument/protocol.cuh)
    ring: str = ""  # K, V or Q

    @property
    def expected(self) -> str:
        """The start of the report line the protocol build must write."""
        return f"rule {self.rule}, ring {self.ring}"


PROTOCOL_PLANTS_DIR = Path(__file__).resolve().parent / "fixtures" / "planted" / "protocol"


def load_protocol_plants(folder: Path = PROTOCOL_PLANTS_DIR) -> dict[str, ProtocolPlant]:
    plants = {}
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        plants[path.stem] = ProtocolPlant(name=path.stem, header=data["header"], passage=data["passage"],
                                          planted=data["planted"], what=" ".join(data["what"].split()),
                                          stage=data["stage"], rule=data["rule"], ring=data["ring"])
    return plants


PROTOCOL_PLANTS = load_protocol_plants()


def plant_text(text: str, plant: Plant) -> str:
    """`text` with the plant's passage replaced; exactly one occurrence, or a clear error."""
    count = text.count(plant.passage)
    if count != 1:
        raise ValueError(f"plant {plant.name}: its passage occurs {count} times in {plant.header} (expected once); "
                         "the header changed, re-anchor the plant in tests/planted_sdpa.py")
    return text.replace(plant.passage, plant.planted)


def make_sdpa_plant_checkout(root: Path, plant_name: str | None) -> Path:
    """A checkout at `root` (kernels/sdpa, params, pyproject.toml) with one plant, or none."""
    shutil.copytree(repo_root() / "kernels" / "sdpa", root / "kernels" / "sdpa")
    shutil.copytree(repo_root() / "params", root / "params")
    shutil.copy(repo_root() / "pyproject.toml", root / "pyproject.toml")
    if plant_name is not None:
        plant = PLANTS.get(plant_name) or PROTOCOL_PLANTS[plant_name]
        header = root / "kernels" / "sdpa" / plant.header
        header.write_text(plant_text(header.read_text(), plant))
    return root
