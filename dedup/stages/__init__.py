"""The dedup stages, in the order the job runs them: the one list to extend with a new method.

    prepare -> ids -> [decontaminate] -> exact -> url -> minhash -> cluster -> lines -> output

Each stage is a module here with one `Stage` (dedup/stages/base.py: name, enabled(cfg), run(ctx) ->
info, and its funnel row and counters); the Spark helpers they share are in common.py. Adding a
dedup method is one new module and one entry in STAGES; the job's loop, resume markers, funnel and
counters follow from the list. A stage that removes documents must come before `output`, and one
that reads another's folder (cluster reads minhash's components) after it. A stage declares the
per-document columns it reads (`Stage.features`), which `prepare` computes. A user's stage needs
no edit here at all: the config's `stages:` names it (`job_stages` puts it before `output`).
"""

from __future__ import annotations

from dedup.config import DedupJobConfig
from dedup.stages.base import DocBatch, Feature, Flow, Stage, StageContext, StageStore
from dedup.stages.cluster import Cluster
from dedup.stages.decontaminate import Decontaminate
from dedup.stages.exact import Exact
from dedup.stages.ids import Ids
from dedup.stages.lines import Lines
from dedup.stages.minhash import MinHash
from dedup.stages.output import Output
from dedup.stages.prepare import Prepare
from dedup.stages.url import Url

STAGES: tuple[Stage, ...] = (
    Prepare(),
    Ids(),
    Decontaminate(),  # off unless the config names evaluation sets
    Exact(),
    Url(),
    MinHash(),
    Cluster(),
    Lines(),
    Output(),
)


def job_stages(cfg: DedupJobConfig, stages: tuple[Stage, ...] = STAGES) -> tuple[Stage, ...]:
    """`stages` with the config's own (`stages:`) inserted before `output`, in their order."""
    at = [s.name for s in stages].index("output")
    return (*stages[:at], *cfg.user_stages(), *stages[at:])


__all__ = ["STAGES", "DocBatch", "Feature", "Flow", "Stage", "StageContext", "StageStore", "job_stages"]
