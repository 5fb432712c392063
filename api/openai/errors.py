"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}. The app answers in
it wherever a route has no shape of its own (validation errors, unknown paths), and renders the
speech pipeline's errors (api/speech/errors.py) in it on the OpenAI routes."""
from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from api.speech.errors import UNSPEAKABLE, SpeechError


def error_type(status: int) -> str:
    """OpenAI's error type for a status: the client's fault for any 4xx (429 named as such), the
    server's for the rest."""
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error" if 400 <= status < 500 else "server_error"


class ApiError(Exception):
    """An error response: HTTP status, OpenAI error body fields, and extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.code, self.param, self.headers)

    @classmethod
    def of(cls, error: SpeechError) -> ApiError:
        """The speech pipeline's `error` as this API answers it (its Retry-After as a header)."""
        if error.code == UNSPEAKABLE:
            return cls(error.status, f"The input cannot be spoken: {error.reason}", "invalid_value", error.param)
        headers = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
        return cls(error.status, error.message, error.code, error.param, headers)


def error_response(
    status: int, message: str, code: str | None = None, param: str | None = None, headers: dict | None = None
) -> JSONResponse:
    body = {"message": message, "type": error_type(status), "param": param, "code": code}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _validation_param(loc: tuple) -> str | None:
    """("body", "voice", "str") → "voice"; a body that is not JSON at all names no parameter."""
    fields = [str(part) for part in loc[1:] if isinstance(part, str)]
    return fields[0] if fields and loc and loc[0] == "body" else None


async def _on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.count_request("invalid")
    first = exc.errors()[0]
    param = _validation_param(tuple(first.get("loc", ())))
    if first.get("type") == "json_invalid" or param is None:
        message = f"The request body is not valid JSON: {first.get('msg')}"
    else:
        message = f"Invalid value for '{param}': {first.get('msg')}"
    return error_response(400, message, "invalid_value" if param else "invalid_json", param)


async def _on_http_error(request: Request, exc: HTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    return error_response(exc.status_code, str(exc.detail), code, headers=getattr(exc, "headers", None))


async def _on_api_error(request: Request, exc: ApiError) -> JSONResponse:
    return exc.response()


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_error)
    app.add_exception_handler(ApiError, _on_api_error)
