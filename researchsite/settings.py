"""Settings for ResearchSite, read from the environment or a `.env` file (django-environ).

Every variable is documented in README.md. Nothing secret has a committed default: without
SECRET_KEY a random key is generated once and kept in the ignored `.local/` folder, so a
fresh clone runs out of the box and production must set its own.
"""

import base64
import hashlib
import hmac
import secrets
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import environ
from csp.constants import NONE, SELF, UNSAFE_HASHES
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DIR = BASE_DIR / ".local"  # ignored by git: generated secret key, admin password

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _local_secret_key() -> str:
    """Return the secret key kept in .local/, creating it on first use."""
    path = LOCAL_DIR / "secret_key"
    if not path.exists():
        LOCAL_DIR.mkdir(exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or _local_secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
PORT = env.int("PORT", default=8000)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "csp",
    "ninja",  # the API's browsable docs (/api/v1/docs) from its own static files, not a CDN
    "chats",
    "citations",
]

MIDDLEWARE = [
    # Each request's id (the proxy's X-Request-ID, or a new one) on its log lines and response.
    "researchsite.logs.request_id_middleware",
    # Under /api/ every error is JSON {"detail": ...}: an unknown route, a refused host, a crash.
    "chats.api.errors.api_json_errors_middleware",
    # A client address that is not an IP address (a proxy passed on a forged header) is
    # answered 400 before anything stores it (researchsite/lockout.py).
    "researchsite.lockout.client_address_middleware",
    # Pages and downloads carry `Cache-Control: no-store` unless their view sets its own.
    "researchsite.no_store.no_store_middleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "allauth.account.middleware.AccountMiddleware",  # single sign-on's flow (researchsite/sso.py)
    "axes.middleware.AxesMiddleware",  # last: turns a refused sign-in into the lock-out page
]

ROOT_URLCONF = "researchsite.urls"
ASGI_APPLICATION = "researchsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# SQLite by default; DATABASE_URL=postgres://... for several processes.
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# Keep connections: opening one per query cost 10-16% of the server's CPU while streaming.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True


def tune_sqlite(database: dict) -> None:
    """Let readers and the event-log writer work concurrently (WAL) and fail late, not at once."""
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database.setdefault("OPTIONS", {}).update(
            {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            }
        )


tune_sqlite(DATABASES["default"])
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channel layer --------------------------------------------------------------------------
# Chat frames (every agent event) travel through chats/live/relay/: in memory within a process,
# and with REDIS_URL over Redis pub/sub to the other processes that show the chat. The channel layer
# carries only stop requests and logouts.
REDIS_URL = env.str("REDIS_URL", default="")
RELAY_PREFIX = env.str("RELAY_PREFIX", default="researchsite:")
if REDIS_URL:
    from redis.driver_info import DriverInfo

    # One DriverInfo for all the layer's connections: without it each new connection looks
    # redis-py's version up in the installed packages' metadata (~0.2 ms).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "driver_info": DriverInfo()}],
                "capacity": 1500,
                "expiry": 60,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "researchsite.channel_layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1500},
        }
    }

# --- Auth -----------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat_list"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the chat page's script reads it to post branch switches
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_COOKIES = env.bool("SECURE_COOKIES", default=False)
if SECURE_COOKIES:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # HSTS only when the site is served over HTTPS (which secure cookies imply).
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)

# Login throttling (django-axes) for the site's and the admin's login: after
# LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that pair is refused
# (even with the right password) until LOGIN_LOCKOUT_MINUTES pass without another failure.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses locked-out pairs before checking
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
LOGIN_LOCKOUT_MINUTES = env.float("LOGIN_LOCKOUT_MINUTES", default=15)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # another user on that address may sign in
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "researchsite.lockout.lockout_response"
# The client address is REMOTE_ADDR: behind a proxy, uvicorn puts the real one there (from
# X-Forwarded-For, trusted only from FORWARDED_ALLOW_IPS, below), so no django-ipware.


def csp_hash(source: str) -> str:
    """Return the CSP source expression that allows exactly this inline text."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


# Content-Security-Policy (django-csp): no inline script, nothing loaded from other sites.
TABLE_ALIGNMENT_STYLE_HASHES = [
    csp_hash(f"text-align:{side}") for side in ("left", "center", "right")
]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # Table column alignment (`style="text-align:…"`, from Markdown tables, server-rendered
        # and previewed) is the only inline style: allow exactly those three values, by hash.
        "style-src-attr": [UNSAFE_HASHES, *TABLE_ALIGNMENT_STYLE_HASHES],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],  # covers ws:// and wss:// of the same host and port
        "frame-ancestors": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "object-src": [NONE],
    }
}

# --- Static files ---------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- The research agent ---------------------------------------------------------------------
# With no key the built-in demo agent (mounted in this site at DEMO_AGENT_PATH) answers.
BIGDATA_API_KEY = env.str("BIGDATA_API_KEY", default="")
DEMO_AGENT_PATH = "/demo-agent/v1/research-agent"
DEMO_AGENT_ENABLED = env.bool("DEMO_AGENT_ENABLED", default=not BIGDATA_API_KEY)
RESEARCH_AGENT_URL = env.str(
    "RESEARCH_AGENT_URL",
    default=(
        "https://agents.bigdata.com/v1/research-agent"
        if BIGDATA_API_KEY
        else f"http://127.0.0.1:{PORT}{DEMO_AGENT_PATH}"
    ),
)
AGENT_CONNECT_TIMEOUT = env.float("AGENT_CONNECT_TIMEOUT", default=10.0)
AGENT_IDLE_TIMEOUT = env.float("AGENT_IDLE_TIMEOUT", default=120.0)
AGENT_MAX_RETRIES = env.int("AGENT_MAX_RETRIES", default=3)
AGENT_PERSISTENCE_MODE = env.str("AGENT_PERSISTENCE_MODE", default="enabled")
# The demo agent signs its checkpoints so that foreign ones are refused like the real API's.
DEMO_AGENT_SECRET = env.str("DEMO_AGENT_SECRET", default="") or SECRET_KEY
DEMO_AGENT_PACE = env.float("DEMO_AGENT_PACE", default=1.0)  # 0 streams as fast as it can
# The key the site sends its own demo agent, which answers nobody else. Derived, not random, so
# that with several workers a request from one is accepted by another's mount.
DEMO_AGENT_TOKEN = hmac.new(SECRET_KEY.encode(), b"demo-agent-api-key", hashlib.sha256).hexdigest()

# --- Agent limits ---------------------------------------------------------------------------
# Each ends a run interrupted with a message naming the limit; what arrived before is kept.
AGENT_MAX_ANSWER_CHARS = env.int("AGENT_MAX_ANSWER_CHARS", default=200_000)  # cut there
AGENT_MAX_EVENTS = env.int("AGENT_MAX_EVENTS", default=20_000)  # per turn
# One line of the agent's stream (counted in characters); a longer one is skipped as it arrives.
# A 10,000-reference GROUNDING line measures 4.1-7.3 MB (chats/agent/sse.py): 16 MiB by default.
AGENT_MAX_LINE_BYTES = env.int("AGENT_MAX_LINE_BYTES", default=16 * 1024 * 1024)
AGENT_MAX_TURN_SECONDS = env.float("AGENT_MAX_TURN_SECONDS", default=1800.0)  # 30 minutes

# --- Providers ------------------------------------------------------------------------------
# The agent a new chat is asked of unless its creator picks another: bigdata, gemini, xai,
# openai, anthropic or llm-sdk (used only when that provider is configured).
DEFAULT_AGENT = env.str("DEFAULT_AGENT", default="bigdata")
# Each is offered when its key (or URL) is set; base URLs and models can be overridden.
GEMINI_API_KEY = env.str("GEMINI_API_KEY", default="")
GEMINI_BASE_URL = env.str("GEMINI_BASE_URL", default="https://generativelanguage.googleapis.com")
GEMINI_MODEL = env.str("GEMINI_MODEL", default="gemini-2.5-flash")
LLMSDK_AGENT_URL = env.str("LLMSDK_AGENT_URL", default="")  # streams llm-sdk partials
LLMSDK_AGENT_TOKEN = env.str("LLMSDK_AGENT_TOKEN", default="")  # sent as a bearer token
LLMSDK_AGENT_MODEL = env.str("LLMSDK_AGENT_MODEL", default="")  # sent as "model" when set

# --- Streaming ------------------------------------------------------------------------------
EVENT_FLUSH_INTERVAL = env.float("EVENT_FLUSH_INTERVAL", default=0.03)  # seconds per batch
# The widest batch, which a process relaying many streams widens to (chats/loop/ticks.py).
EVENT_FLUSH_INTERVAL_MAX = env.float("EVENT_FLUSH_INTERVAL_MAX", default=0.06)
TURN_LEASE_SECONDS = env.float("TURN_LEASE_SECONDS", default=30.0)
TURN_HEARTBEAT_SECONDS = env.float("TURN_HEARTBEAT_SECONDS", default=10.0)
WEBSOCKET_MAX_FRAME_BYTES = 16 * 1024
MESSAGE_MAX_CHARS = 8000

# --- Limits ---------------------------------------------------------------------------------
# Enforced by the server; each refusal reaches the page as an error frame with a code.
# Open chat sockets per user, counted in the database so the cap holds across processes.
WS_MAX_SOCKETS_PER_USER = env.int("WS_MAX_SOCKETS_PER_USER", default=10)
# Frames per second per socket (a token bucket of this size, refilled at this rate).
WS_MAX_FRAMES_PER_SECOND = env.float("WS_MAX_FRAMES_PER_SECOND", default=20.0)
# A page that reads slower than its turns stream keeps this many frames queued (about 15 s of
# one streaming chat); past that its queued event frames are dropped and it catches up from the
# event log instead (chats/pages/consumer.py).
WS_MAX_QUEUED_FRAMES = env.int("WS_MAX_QUEUED_FRAMES", default=500)
# Streaming turns per user across all their chats (and always one per chat).
AGENT_MAX_CONCURRENT_TURNS = env.int("AGENT_MAX_CONCURRENT_TURNS", default=3)

# --- Logging --------------------------------------------------------------------------------
# "json": every log line (Django's and uvicorn's too) is one JSON object (researchsite/logs.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be 'text' or 'json', not {LOG_FORMAT!r}")
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMATTERS = {
    "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    "json": {"()": "researchsite.logs.json_formatter"},
}
# Every line goes through the one console handler, which adds the turn's or request's ids and
# then masks the configured secrets in the line and its traceback (chats/agent/redaction.py).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "researchsite.logs.ContextFilter"},
        "redact_secrets": {"()": "chats.agent.redaction.RedactSecretsFilter"},
    },
    "formatters": {LOG_FORMAT: LOG_FORMATTERS[LOG_FORMAT]},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context", "redact_secrets"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Request options and connection chatter at DEBUG and INFO: the HTTP clients and the
        # providers' SDKs (openai, anthropic) speak only of what went wrong.
        **{
            name: {"level": "WARNING"}
            for name in ("httpx", "httpcore", "httpx2", "httpcore2", "openai", "anthropic")
        },
        "axes": {"level": "WARNING"},  # failed sign-ins and lock-outs, not its start-up chatter
        # uvicorn configures handlers of its own for its loggers, which would write plain text
        # and mask nothing: its lines go through the console handler instead. Its access log
        # stays off (researchsite/serve.py; the proxy logs requests).
        **{
            name: {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False}
            for name in ("uvicorn", "uvicorn.error")
        },
    },
}

# --- Providers: OpenAI, xAI, Anthropic -------------------------------------------------------
# A provider is offered when its key is set; the base URLs point the official SDKs elsewhere
# (a proxy, or a stand-in in tests). Timeouts and retries are the agent's (AGENT_*).
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="https://api.openai.com/v1")
OPENAI_MODEL = env.str("OPENAI_MODEL", default="gpt-4.1")
XAI_API_KEY = env.str("XAI_API_KEY", default="")
XAI_BASE_URL = env.str("XAI_BASE_URL", default="https://api.x.ai/v1")
XAI_MODEL = env.str("XAI_MODEL", default="grok-4")
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="https://api.anthropic.com")
ANTHROPIC_MODEL = env.str("ANTHROPIC_MODEL", default="claude-sonnet-4-6")
ANTHROPIC_MAX_TOKENS = env.int("ANTHROPIC_MAX_TOKENS", default=4096)  # the API requires one

# --- Workflows ------------------------------------------------------------------------------
# POST /v1/workflow/execute next to the research agent (docs/PROTOCOL.md, "Workflows"). Empty:
# derived from RESEARCH_AGENT_URL when used (chats/agent/providers/__init__.py, `workflow_url`),
# so a test or a deploy that moves the agent moves its workflows with it.
WORKFLOW_URL = env.str("WORKFLOW_URL", default="")
DEMO_WORKFLOW_PATH = "/demo-agent/v1/workflow/execute"  # where researchsite/asgi.py mounts it
# Template ids the Workflows page offers, comma-separated (besides the user's saved templates).
WORKFLOW_TEMPLATE_IDS = env.list("WORKFLOW_TEMPLATE_IDS", default=[])
# The templates the agent has built in, by id: the name the Workflows page shows and the inputs
# its form asks for. Here, where the site is put together, the demo agent's, when it is mounted
# (researchsite/asgi.py): nothing in chats/ knows the demo agent.
WORKFLOW_BUILTIN_TEMPLATES: dict[str, dict[str, Any]] = {}
if DEMO_AGENT_ENABLED:
    from demo_agent.workflows import BUILTIN_TEMPLATES as demo_templates

    WORKFLOW_BUILTIN_TEMPLATES = {
        tid: {"name": template.name, "inputs": list(template.inputs)}
        for tid, template in demo_templates.items()
    }
# How often a dropped workflow stream is resumed with its execution_id before the turn gives up.
WORKFLOW_MAX_RESUMES = env.int("WORKFLOW_MAX_RESUMES", default=3)
# False makes the demo agent refuse `model_name: pro` with a 403, to try that path offline.
DEMO_AGENT_PRO_ENTITLED = env.bool("DEMO_AGENT_PRO_ENTITLED", default=True)

# --- Client addresses, sign-in throttling ---------------------------------------------------
# The proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (comma-separated addresses,
# uvicorn's setting of the same name; `*` for any). Empty: none, so no header a client writes
# changes the address sign-in lock-outs count by (researchsite/serve.py).
FORWARDED_ALLOW_IPS = env.str("FORWARDED_ALLOW_IPS", default="")
# Failed sign-ins for one username from all addresses together before that username is locked
# out (for LOGIN_LOCKOUT_MINUTES, like a username and address pair): guesses spread over many
# addresses stop too. Higher than LOGIN_FAILURE_LIMIT: anyone can spend it for a username.
LOGIN_FAILURE_LIMIT_PER_USERNAME = env.int("LOGIN_FAILURE_LIMIT_PER_USERNAME", default=20)
AXES_HANDLER = "researchsite.lockout.LoginFailureHandler"

# --- Charts and structured output: what a page shows of them --------------------------------
# A chart's inline data past these caps is not drawn (shown as its table, cut to the caps); a
# structured output's table shows at most these rows and columns (its CSV and JSON downloads
# carry all of it). Cells longer than the cap are cut with an ellipsis.
CHART_MAX_ROWS = env.int("CHART_MAX_ROWS", default=1_000)
CHART_MAX_COLUMNS = env.int("CHART_MAX_COLUMNS", default=20)
CHART_MAX_CELL_CHARS = env.int("CHART_MAX_CELL_CHARS", default=200)
STRUCTURED_OUTPUT_MAX_ROWS = env.int("STRUCTURED_OUTPUT_MAX_ROWS", default=500)
STRUCTURED_OUTPUT_MAX_COLUMNS = env.int("STRUCTURED_OUTPUT_MAX_COLUMNS", default=20)
STRUCTURED_OUTPUT_MAX_CELL_CHARS = env.int("STRUCTURED_OUTPUT_MAX_CELL_CHARS", default=200)

# --- Checking cited pages -------------------------------------------------------------------
# When a finished answer cites a web page without a passage (Gemini, OpenAI, xAI...), the site
# fetches the page after the answer is shown and checks the claim's figures against its words
# (chats/verify/, citations/pages.py; README "Checking cited pages" lists the safety rules).
SOURCE_FETCH_ENABLED = env.bool("SOURCE_FETCH_ENABLED", default=True)
# `host` or `host:port` entries fetched even though their address is private (an intranet).
SOURCE_FETCH_ALLOWED_HOSTS = env.list("SOURCE_FETCH_ALLOWED_HOSTS", default=[])
# A page fetched this recently is read from the cache (citations.SourcePage), not fetched again.
SOURCE_FETCH_MAX_AGE_HOURS = env.float("SOURCE_FETCH_MAX_AGE_HOURS", default=24.0)
# Pages one turn reads at most (the first cited); the others are "not read: over the limit".
SOURCE_FETCH_MAX_PAGES_PER_TURN = env.int("SOURCE_FETCH_MAX_PAGES_PER_TURN", default=20)

# --- Watches: re-running a question on a schedule ---------------------------------------------
# django-tasks with its database backend keeps the queue in this database (chats/watch/tasks.py).
INSTALLED_APPS += ["django_tasks", "django_tasks_db"]
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# Run the task worker in a thread of each server process (`make run` runs everything); false
# leaves the watches to `manage.py db_worker` processes started beside the servers.
WATCH_WORKER = env.bool("WATCH_WORKER", default=True)
WATCH_MAX_PER_USER = env.int("WATCH_MAX_PER_USER", default=20)
WATCH_MAX_FAILURES = env.int("WATCH_MAX_FAILURES", default=3)  # in a row, then it stops
WATCH_RETRY_MINUTES = env.int("WATCH_RETRY_MINUTES", default=15)  # after a limit refused a run
# E-mail the analyst about changes (to the account's address) through Django's e-mail backend,
# configured by EMAIL_URL (e.g. smtp+tls://user:password@smtp.example.com:587).
WATCH_EMAIL = env.bool("WATCH_EMAIL", default=False)
if env.str("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="researchsite@localhost")
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000")  # links in e-mails and webhooks

# --- The API, its webhooks and its MCP server (chats/api/, chats/webhooks/; docs/API.md) -----
# Hosts (or host:port) that webhooks may be sent to although their address is private: the
# address rules of chats/outbound.py otherwise refuse them, when an endpoint is added and at
# every delivery. SOURCE_FETCH_ALLOWED_HOSTS does not apply: which intranet pages an agent's
# citations may make the site read is not where its users may make it send their events.
WEBHOOK_ALLOWED_HOSTS = env.list("WEBHOOK_ALLOWED_HOSTS", default=[])
# Seconds before each retry of a failed delivery (then it is failed): 7 attempts over ~17 hours.
WEBHOOK_RETRY_SECONDS = env.list(
    "WEBHOOK_RETRY_SECONDS", cast=int, default=[5, 300, 1800, 7200, 18000, 36000]
)
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=10.0)  # per attempt
WEBHOOK_MAX_PER_USER = env.int("WEBHOOK_MAX_PER_USER", default=10)

# --- Single sign-on (OpenID Connect) and teams -----------------------------------------------
# django-allauth's `openid_connect` provider (researchsite/sso.py). With no OIDC_SERVER_URL the
# login page is the password form alone, as without it.
INSTALLED_APPS += [
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
]
OIDC_SERVER_URL = env.str("OIDC_SERVER_URL", default="")  # the issuer; discovery below it
OIDC_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="")
OIDC_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="your identity provider")
# A claim listing the user's groups (e.g. "groups"): teams follow it at every sign-in.
OIDC_TEAMS_CLAIM = env.str("OIDC_TEAMS_CLAIM", default="")
# False: only superusers sign in with a password; everyone else through the identity provider.
PASSWORD_LOGIN = env.bool("PASSWORD_LOGIN", default=True)
# The provider's id in allauth's URLs: the redirect URI is /accounts/oidc/sso/login/callback/.
OIDC_PROVIDER_ID = "sso"
# The provider itself is built from the OIDC_* settings (researchsite.sso, `list_apps`).
SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"OAUTH_PKCE_ENABLED": True}}
ACCOUNT_ADAPTER = "researchsite.sso.AccountAdapter"
SOCIALACCOUNT_ADAPTER = "researchsite.sso.SocialAccountAdapter"
# An account is found by the provider's subject only: never by an e-mail address, which a user
# may be able to set at the provider to anyone's.
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = False
ACCOUNT_UNIQUE_EMAIL = False  # so a first sign-in never stops at a form over a shared address
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"  # the provider vouches for its users
ACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_EMAIL_REQUIRED = False
SOCIALACCOUNT_STORE_TOKENS = False  # the site calls nothing of the provider after sign-in
SOCIALACCOUNT_LOGIN_ON_GET = False  # the login button POSTs (CSRF-checked)
ACCOUNT_LOGOUT_REDIRECT_URL = "login"

# --- Usage and cost ---------------------------------------------------------------------------
# Each finished turn's tokens are priced from the price table (chats/usage/prices.py) and kept
# (chats/usage/). MODEL_PRICES (inline JSON, or the path of a JSON file) adds or overrides prices:
# {"model": {"input": dollars per million, "output": ..., "cached": ..., "request": per turn}}.
MODEL_PRICES = env.str("MODEL_PRICES", default="")


def _monthly_limit(name: str, kind: type[int] | type[Decimal]) -> int | Decimal | None:
    """A monthly limit: unset or empty is none; otherwise a positive number (1,000,000 reads)."""
    value = env.str(name, default="").strip().replace(",", "").replace("_", "")
    if not value:
        return None
    try:
        limit = kind(value)
    except (ValueError, ArithmeticError) as error:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}") from error
    if not (Decimal(limit).is_finite() and 0 < limit < 10**15):
        raise ImproperlyConfigured(f"{name} must be more than 0 (leave it unset for no limit)")
    return limit


# Each user's tokens, and dollars of priced usage, per calendar month (in TIME_ZONE): a question
# that would pass the limit is refused before the agent is called. Unset: no limit. Overridden
# per user and per team in the admin (chats/usage/limits.py).
USAGE_MONTHLY_LIMIT_TOKENS = _monthly_limit("USAGE_MONTHLY_LIMIT_TOKENS", int)
USAGE_MONTHLY_LIMIT_COST = _monthly_limit("USAGE_MONTHLY_LIMIT_COST", Decimal)

# --- Operations: health, readiness, metrics, graceful shutdown -------------------------------
# /healthz, /readyz and /metrics are served by researchsite/operations.py (see docs/DEPLOY.md).
# METRICS_ENABLED=false records nothing and /metrics answers 404 (the benchmarks' "off").
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=True)
# Who may read /metrics: these addresses or networks (the client as uvicorn sees it, after
# X-Forwarded-For from a trusted proxy), or a request with "Authorization: Bearer METRICS_TOKEN".
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=["127.0.0.1", "::1"])
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# How long /readyz waits for the database or Redis before calling it unreachable.
READINESS_TIMEOUT_SECONDS = env.float("READINESS_TIMEOUT_SECONDS", default=3.0)
# On SIGTERM a worker closes its pages' sockets (they reconnect elsewhere) and lets its running
# turns finish for up to this long before ending the rest "interrupted" (chats/run/draining.py).
SHUTDOWN_GRACE_SECONDS = env.float("SHUTDOWN_GRACE_SECONDS", default=600.0)
