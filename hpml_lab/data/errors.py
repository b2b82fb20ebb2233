"""The one error type the data layer raises for missing, partial or corrupted data."""


class DatasetError(RuntimeError):
    """Data is missing or bad; the message is one line and says how to fix it.

    Raised in a DataLoader worker, torch re-raises it in the main process as DatasetError("Caught DatasetError
    in DataLoader worker process 0.\\nOriginal Traceback ..."): that message is cut back to the original
    line."""

    def __init__(self, message: object = "") -> None:
        text = str(message)
        if text.startswith("Caught DatasetError in DataLoader worker"):
            last = [ln for ln in text.splitlines() if ln.strip()][-1]
            text = last.split("DatasetError: ", 1)[-1]
        super().__init__(text)
