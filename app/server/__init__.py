"""The HTTP shell around pure decisions: FastAPI app, AdmissionReview wire types, /mutate and
/validate decisions, service state (policy reload, inventory, certificates), TLS, metrics."""

from . import admission, mutation, tls, validation
from .metrics import Metrics
from .service import PolicyHolder, ServiceState
from .webhook import MAX_BODY, create_app, read_body

__all__ = ["MAX_BODY", "Metrics", "PolicyHolder", "ServiceState", "admission", "create_app",
           "mutation", "read_body", "tls", "validation"]
