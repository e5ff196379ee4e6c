"""URL routes: admin, API, sign-in, language switch, and each app's pages."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.generic import RedirectView
from django.views.i18n import set_language

from planner_site.api import api

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="crews:crew-list", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("account/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    # The language switch works on the sign-in page too.
    path("i18n/setlang/", login_not_required(set_language), name="set_language"),
    path("", include("agents.urls")),
    path("", include("crews.urls")),
    path("", include("knowledge.urls")),
    path("", include("planner_site.site_urls")),
]

# A body too large or too many fields: the API's JSON error, or a page that says so.
handler400 = "planner_site.views_errors.bad_request"

