"""Search-v2 task data: the v1 sources rebuilt so that hop counts hold and recipes do not.

* ``corpus``: the v2 knowledge base. Country profiles no longer list borders; each country's
  borders are a document of their own, so the country bordering A and B is found by its
  border list and its capital by its profile (two documents, not one). Capitals follow the
  corpus's own Wikipedia text; contested capitals are never asked; defunct states and
  districts taken for cities are gone.
* ``generators``: templates with at least three wordings each, chosen per question, hop
  counts equal to the documents a solver needs, and persons found through Wikipedia's own
  descriptions (nationality, occupation, decade of birth).
* ``dataset``: the cached v2 dataset and its splits.
"""

from tasks.search.v2.corpus import build_knowledge_base_v2
from tasks.search.v2.dataset import BUILDER_VERSION_V2, load_default_dataset_v2
from tasks.search.v2.generators import generate_audited_v2
from tasks.search.v2.templates import TEMPLATES_V2, TemplateV2, answer_kind, match_template_v2

__all__ = ["BUILDER_VERSION_V2", "TEMPLATES_V2", "TemplateV2", "answer_kind", "build_knowledge_base_v2",
           "generate_audited_v2", "load_default_dataset_v2", "match_template_v2"]
