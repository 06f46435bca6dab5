from allauth.account.models import EmailAddress
from allauth.socialaccount import views as socialaccount_views
from allauth.socialaccount.models import SocialApp, SocialToken
from allauth.socialaccount.providers.openid_connect import views as openid_connect_views
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from chats.api.errors import not_found as api_not_found
from chats.api.views import api
from researchsite.sso import AdminPasswordLoginForm, SiteLoginView, provider_login

admin.site.login_form = AdminPasswordLoginForm  # PASSWORD_LOGIN=false: superusers only
# allauth's models the site does not use stay out of the admin: the provider comes from the
# OIDC_* settings, no provider token is kept, and e-mail addresses are the accounts' own. Its
# social accounts (which provider subject is which user) stay listed.
for unused in (SocialApp, SocialToken, EmailAddress):
    admin.site.unregister(unused)

# Of django-allauth, only what signing in with the identity provider needs: the provider's
# login and callback (/accounts/oidc/sso/login/ and .../login/callback/, the redirect URI), and
# the pages its flow ends on when the provider refuses or the user cancels. No allauth sign-up,
# password or e-mail pages: accounts come from the provider or an administrator.
sso_urls = [
    path("oidc/<str:provider_id>/login/", provider_login, name="openid_connect_login"),
    path(
        "oidc/<str:provider_id>/login/callback/",
        openid_connect_views.callback,
        name="openid_connect_callback",
    ),
    path(
        "3rdparty/login/cancelled/",
        socialaccount_views.login_cancelled,
        name="socialaccount_login_cancelled",
    ),
    path(
        "3rdparty/login/error/", socialaccount_views.login_error, name="socialaccount_login_error"
    ),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    re_path(r"^api/", api_not_found),  # every other path under /api/: a JSON 404
    path("login/", SiteLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include(sso_urls)),
    path("", include("chats.urls")),
]
