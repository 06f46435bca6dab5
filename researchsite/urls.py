from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from chats.api.errors import not_found as api_not_found
from chats.api.views import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    re_path(r"^api/", api_not_found),  # every other path under /api/: a JSON 404
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("chats.urls")),
]
