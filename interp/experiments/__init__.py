"""The paper's experiments as functions over a model: in-context accuracy per task and length
(``directional``), accuracy under head ablation (``head_ablation``), edge patching
(``edge_study``), the realistic tasks (``realistic``), training from scratch (``from_scratch``),
fine-tuning (``finetune``) and the theory table (``theory_table``). Scripts in ``analyses/``
call these."""

from interp.experiments.ablation_setup import (SELECTABLE_SCORES, AblationConfig, ablation_conditions,
                                              ablation_prompt_sets, add_task_attention, check_ablation_inputs,
                                              check_prompt_context, reference_means, study_head_scores)
from interp.experiments.head_ablation import (ABLATION_COLUMNS, ABLATION_ROW_SHAPE, AblationRow, AblationSummaryRow,
                                              ablation_study, ablation_summary)
from interp.experiments.directional import (DIRECTIONAL_COLUMNS, DIRECTIONAL_ROW_SHAPE, DirectionalRow, PairRow,
                                            TemplateSummaryRow, cell_configs,
                                            check_directional_inputs, directional_bias, over_templates, pair_table,
                                            task_lengths)

__all__ = [
    "ABLATION_COLUMNS", "ABLATION_ROW_SHAPE", "DIRECTIONAL_COLUMNS", "DIRECTIONAL_ROW_SHAPE", "SELECTABLE_SCORES",
    "AblationConfig",
    "AblationRow", "AblationSummaryRow", "DirectionalRow", "PairRow", "TemplateSummaryRow", "ablation_conditions",
    "ablation_prompt_sets", "ablation_study", "ablation_summary", "add_task_attention", "cell_configs", "check_ablation_inputs", "check_directional_inputs", "check_prompt_context", "directional_bias",
    "over_templates", "pair_table", "reference_means", "study_head_scores", "task_lengths",
]
