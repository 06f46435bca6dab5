from django.urls import path

from chats.teams import views

urlpatterns = [
    path("team/", views.team_page, name="team_page"),
    path("team/new/", views.team_new, name="team_new"),
    path("team/<int:team_id>/members/", views.team_member_add_view, name="team_member_add"),
    path(
        "team/<int:team_id>/members/<int:user_id>/remove/",
        views.team_member_remove_view,
        name="team_member_remove",
    ),
    path("chats/<int:chat_id>/team-share/", views.chat_team_share_view, name="chat_team_share"),
    path(
        "chats/<int:chat_id>/team-unshare/",
        views.chat_team_unshare_view,
        name="chat_team_unshare",
    ),
    path(
        "chats/<int:chat_id>/turns/<int:turn_id>/continue/",
        views.chat_continue_view,
        name="chat_continue",
    ),
]
