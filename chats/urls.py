from django.urls import path

from . import views, views_options, views_workflows

urlpatterns = [
    path("", views.chat_list, name="chat_list"),
    path("chats/new/", views.chat_new, name="chat_new"),
    path("chats/<int:chat_id>/", views.chat_detail, name="chat_detail"),
    path("chats/<int:chat_id>/branch/", views.chat_branch_select, name="chat_branch_select"),
    path("chats/<int:chat_id>/export.md", views.chat_export, name="chat_export"),
    path("schemas/", views_options.output_schemas, name="output_schemas"),
    path(
        "schemas/<int:schema_id>/delete/",
        views_options.output_schema_delete,
        name="output_schema_delete",
    ),
    path("workflows/", views_workflows.workflow_list, name="workflow_list"),
    path("workflows/run/", views_workflows.workflow_run, name="workflow_run"),
    path("workflows/save/", views_workflows.workflow_save, name="workflow_save"),
]
