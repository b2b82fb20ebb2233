"""The one error type the data layer raises for missing, partial or corrupted data."""


class DatasetError(RuntimeError):
    """Data is missing or bad; the message is one line and says how to fix it."""
