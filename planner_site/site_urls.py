"""Page routes of the site's own admin area (people, usage, audit log) and everyone's API tokens."""

from django.urls import path

from planner_site import views_people, views_usage

app_name = "site"
urlpatterns = [
    path("people/", views_people.people_list, name="people-list"),
    path("people/budget/", views_people.site_budget, name="site-budget"),
    path("people/invite/", views_people.person_invite, name="person-invite"),
    path("people/<int:user_id>/", views_people.person_detail, name="person-detail"),
    path("people/<int:user_id>/role/", views_people.person_role, name="person-role"),
    path("people/<int:user_id>/active/", views_people.person_active, name="person-active"),
    path("people/<int:user_id>/budget/", views_people.person_budget, name="person-budget"),
    path("account/tokens/", views_people.token_list, name="token-list"),
    path("account/tokens/<int:token_id>/revoke/", views_people.token_revoke, name="token-revoke"),
    path("usage/", views_usage.usage, name="usage"),
    path("audit/", views_usage.audit_list, name="audit-list"),
]
