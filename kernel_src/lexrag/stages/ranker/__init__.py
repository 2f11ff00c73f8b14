"""The learned ranker: LightGBM's LambdaRank reordering the top of each query's fused list (the
``ranker`` stage), and the relevance probabilities the ``expected_f1`` count reads.

Per candidate citation (the fused list's first ``ranker.depth`` distinct citations) the features
are those of :mod:`lexrag.stages.ranker_features`, set by name: its fused rank and score; for each
signal the model was trained with, its rank in it and its score relative to the signal's best; how
many signals list it; how its article and its law code stand in the list; whether the question
names its code; its kind, paragraph and length.  Nothing names a code or an area, so what the model
learns is how the signals relate to relevance, which can carry over to legal areas the training
questions never touched.

The package's parts:

- :mod:`~lexrag.stages.ranker.model`: the model, its fit and calibration, its artifact (folder
  ``ranker/``: ``model.txt``, LightGBM's own text, no pickle, and ``params.json``) and LightGBM's
  thread count, a setting of the run, never of the model;
- :mod:`~lexrag.stages.ranker.checks`: every field of ``params.json`` and the whole of
  ``model.txt`` checked before LightGBM reads them (its own parser aborts the process on a damaged
  model); a model whose feature list is not the one this code computes is refused in one line;
- :mod:`~lexrag.stages.ranker.training`: what a training run leaves out (``CANDIDATE_OFF``) and so
  which signals a ranker can never have been trained with;
- :mod:`~lexrag.stages.ranker.stage`: the ``ranker`` stage, registered on import.
"""

from lexrag.stages.ranker.checks import check_model_text, check_ranker_params
from lexrag.stages.ranker.model import PARAMS, LearnedRanker, TrainingRows, lightgbm_threads
from lexrag.stages.ranker.stage import Ranker, load_ranker_step
from lexrag.stages.ranker.training import CANDIDATE_OFF, not_in_training

__all__ = ["PARAMS", "TrainingRows", "LearnedRanker", "lightgbm_threads", "check_model_text",
           "check_ranker_params", "load_ranker_step", "Ranker", "CANDIDATE_OFF", "not_in_training"]
