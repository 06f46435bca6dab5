from django.urls import path

from . import views

urlpatterns = [
    path("", views.chat_list, name="chat_list"),
    path("chats/new/", views.chat_new, name="chat_new"),
    path("chats/<int:chat_id>/", views.chat_detail, name="chat_detail"),
    path("chats/<int:chat_id>/branch/", views.chat_branch_select, name="chat_branch_select"),
    path("chats/<int:chat_id>/export.md", views.chat_export, name="chat_export"),
    path(
        "chats/<int:chat_id>/turns/<int:turn_id>/structured.<str:fmt>",
        views.turn_structured_output,
        name="turn_structured_output",
    ),
]
