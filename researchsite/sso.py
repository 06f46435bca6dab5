"""Single sign-on with OpenID Connect (django-allauth's `openid_connect` provider), and the
password form beside it.

- allauth does the protocol: discovery from OIDC_SERVER_URL, the authorization code flow with
  PKCE and `state`, the ID token checked against the provider's keys, the userinfo claims.
- An account is found by the provider's subject (allauth's SocialAccount uid) and never by its
  e-mail: e-mail matching is off (settings), so an address someone sets at the provider cannot
  take over another account. The first sign-in makes the account from `preferred_username`
  (made unique if taken) and `email`.
- At every sign-in the `email` claim becomes the account's address (watch e-mails go there),
  and, with OIDC_TEAMS_CLAIM, the user's teams follow the claim's groups
  (`chats.teams.services.team_memberships_sync`).
- PASSWORD_LOGIN=false leaves the password form to superusers (the site's and the admin's).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp, SocialLogin
from allauth.socialaccount.providers.openid_connect import views as openid_connect_views
from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import NON_FIELD_ERRORS
from django.dispatch import receiver
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from chats.teams.services import team_memberships_sync

logger = logging.getLogger(__name__)

PASSWORD_LOGIN_OFF = "Sign in with {name}: password sign-in is for administrators only."  # noqa: S105


def oidc_enabled() -> bool:
    return bool(settings.OIDC_SERVER_URL and settings.OIDC_CLIENT_ID)


def provider_form_action(response: HttpResponse) -> HttpResponse:
    """Let the page's sign-in form lead to the identity provider: the CSP's `form-action
    'self'` also holds for the redirects a form's answer makes, so the provider's origin is
    added, on the pages that post to allauth's login only."""
    if oidc_enabled():
        parts = urlsplit(settings.OIDC_SERVER_URL)
        response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"]}  # type: ignore[attr-defined]
    return response


def provider_login(request, provider_id: str) -> HttpResponse:
    """allauth's login view (a POST redirects to the provider; a GET asks to confirm)."""
    return provider_form_action(openid_connect_views.login(request, provider_id))


class PasswordAllowed:
    """A password form that, with PASSWORD_LOGIN=false, lets only superusers in."""

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)  # type: ignore[misc]
        if not settings.PASSWORD_LOGIN and not user.is_superuser:
            name = settings.OIDC_PROVIDER_NAME
            raise forms.ValidationError(PASSWORD_LOGIN_OFF.format(name=name), code="sso_only")


class PasswordLoginForm(PasswordAllowed, AuthenticationForm):
    pass


class SiteLoginView(LoginView):
    """The login page: "Sign in with {OIDC_PROVIDER_NAME}" when a provider is set, and the
    password form (for superusers only with PASSWORD_LOGIN=false)."""

    form_class = PasswordLoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        refused = form.errors.as_data().get(NON_FIELD_ERRORS, []) if form is not None else []
        context["password_refused"] = next(
            (error.message for error in refused if error.code == "sso_only"), ""
        )
        context["password_login"] = settings.PASSWORD_LOGIN
        if oidc_enabled():
            context["sso_name"] = settings.OIDC_PROVIDER_NAME
            context["sso_url"] = reverse("openid_connect_login", args=[settings.OIDC_PROVIDER_ID])
        if self.request.GET.get("refused") == "inactive":
            context["sso_error"] = "This account is inactive. Ask an administrator."
        return context

    def render_to_response(self, context, **kwargs):
        return provider_form_action(super().render_to_response(context, **kwargs))


class AdminPasswordLoginForm(PasswordAllowed, AdminAuthenticationForm):
    pass


class AccountAdapter(DefaultAccountAdapter):
    """allauth's account side: no sign-up of its own (accounts come from the identity provider,
    or are made by an administrator); an inactive account is told so on the login page."""

    def is_open_for_signup(self, request) -> bool:
        return False

    def respond_user_inactive(self, request, user):
        return redirect(f"{reverse('login')}?refused=inactive")


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    """The identity provider's first sign-in makes the account (never matched by e-mail)."""

    def is_open_for_signup(self, request, sociallogin: SocialLogin) -> bool:
        return oidc_enabled()

    def list_apps(self, request, provider=None, client_id=None) -> list[SocialApp]:
        """The one provider, from the OIDC_* settings (none without them)."""
        app = SocialApp(
            provider="openid_connect",
            provider_id=settings.OIDC_PROVIDER_ID,
            name=settings.OIDC_PROVIDER_NAME,
            client_id=settings.OIDC_CLIENT_ID,
            secret=settings.OIDC_CLIENT_SECRET,
            settings={"server_url": settings.OIDC_SERVER_URL, "oauth_pkce_enabled": True},
        )
        if not oidc_enabled() or (client_id and client_id != app.client_id):
            return []
        if provider and provider not in (app.provider, app.provider_id):
            return []
        return [app]

    def populate_user(self, request, sociallogin: SocialLogin, data: dict):
        user = super().populate_user(request, sociallogin, data)
        if not user.username and data.get("email"):
            user.username = data["email"].split("@")[0]  # made unique by allauth if taken
        return user


@receiver(user_logged_in, dispatch_uid="researchsite.sso.follow_claims")
def follow_claims(sender, request, user, sociallogin: SocialLogin | None = None, **kwargs):
    """Every sign-in through the provider: the `email` claim becomes the account's address, and
    with OIDC_TEAMS_CLAIM the user's teams follow the groups it lists."""
    if sociallogin is None:
        return
    claims = sociallogin.account.get_provider_account().get_user_data() or {}
    email = claims.get("email")
    if isinstance(email, str) and email and email != user.email:
        user.email = email
        user.save(update_fields=["email"])
    claim = settings.OIDC_TEAMS_CLAIM
    if claim:
        groups = claims.get(claim) or []
        if isinstance(groups, str):
            groups = [groups]
        if not isinstance(groups, list):
            logger.warning("The %s claim is not a list of groups; teams left as they are", claim)
            return
        team_memberships_sync(user=user, groups=[g for g in groups if isinstance(g, str)])
