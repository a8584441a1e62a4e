"""The HTTP shell around pure decisions: FastAPI app, AdmissionReview wire types, /mutate and
/validate decisions, service state (policy reload, inventory, certificates), TLS, metrics."""

from . import admission, mutation, tls, validation
from .metrics import Metrics
from .protocol import DeadlineHttpProtocol, small_tls_buffers
from .service import PolicyHolder, ServiceState
from .unmigrated_count import UnmigratedCount
from .budget_watch import BudgetWatch
from .queue_budget_watch import QueueBudgetWatch
from .gpu_priorities import GpuPriorityWatch
from .kueue_watch import KueueWatch
from .webhook import MAX_BODY, create_app, create_health_app, read_body

__all__ = ["BudgetWatch", "GpuPriorityWatch", "QueueBudgetWatch", "KueueWatch", "UnmigratedCount", "MAX_BODY", "DeadlineHttpProtocol", "Metrics", "PolicyHolder", "ServiceState", "admission", "create_app", "create_health_app",
           "mutation", "read_body", "small_tls_buffers", "tls", "validation"]
