from django.urls import include, path

from chats.api import pages as api_pages
from chats.library import views as library
from chats.pages import compare as views_compare
from chats.pages import options as views_options
from chats.pages import preferences as views_preferences
from chats.pages import usage as views_usage
from chats.pages import views
from chats.pages import workflows as views_workflows

# One answer of a chat, below chats/<chat_id>/turns/<turn_id>/.
turn_urls = [
    path("answer.md", views.turn_markdown, name="turn_markdown"),
    path("structured.<str:fmt>", views.turn_structured_output, name="turn_structured_output"),
    path("compare/", views_compare.turn_compare, name="turn_compare"),
]

# One chat, below chats/<chat_id>/.
chat_urls = [
    path("", views.chat_detail, name="chat_detail"),
    path("branch/", views.chat_branch_select, name="chat_branch_select"),
    path("export.md", views.chat_export, name="chat_export"),
    # The library (chats/library/): organise, share, export.
    path("rename/", library.chat_rename_view, name="chat_rename"),
    path("pin/", library.chat_pin_view, name="chat_pin"),
    path("archive/", library.chat_archive_view, name="chat_archive"),
    path("delete/", library.chat_delete_view, name="chat_delete"),
    path("share/", library.chat_share_view, name="chat_share"),
    path("unshare/", library.chat_share_revoke_view, name="chat_unshare"),
    path("export.json", library.chat_export_json, name="chat_export_json"),
    path("print/", library.chat_print, name="chat_print"),
    path("turns/<int:turn_id>/", include(turn_urls)),
]

urlpatterns = [
    path("", views.chat_list, name="chat_list"),
    path("chats/new/", views.chat_new, name="chat_new"),
    path("chats/search/", library.chat_search, name="chat_search"),
    path("chats/archived/", library.chat_archived, name="chat_archived"),
    path("chats/<int:chat_id>/", include(chat_urls)),
    path("shared/<str:token>/", library.chat_shared, name="chat_shared"),
    path(
        "shared/<str:token>/turns/<int:turn_id>/compare/",
        views_compare.shared_turn_compare,
        name="shared_turn_compare",
    ),
    path("schemas/", views_options.output_schemas, name="output_schemas"),
    path(
        "schemas/<int:schema_id>/delete/",
        views_options.output_schema_delete,
        name="output_schema_delete",
    ),
    path("", include("chats.watch.urls")),  # Watch, the "Changes" page
    path("", include("chats.teams.urls")),  # the "Team" page, sharing with a team
    path("workflows/", views_workflows.workflow_list, name="workflow_list"),
    path("workflows/run/", views_workflows.workflow_run, name="workflow_run"),
    path("workflows/save/", views_workflows.workflow_save, name="workflow_save"),
    path("preferences/theme/", views_preferences.theme_set_view, name="theme_set"),
    path("usage/", views_usage.usage_page, name="usage"),
    # The API tokens page (chats/api/pages.py): tokens and webhook endpoints.
    path("api-tokens/", api_pages.api_tokens, name="api_tokens"),
    path("api-tokens/new/", api_pages.api_token_new, name="api_token_new"),
    path(
        "api-tokens/<int:token_id>/revoke/",
        api_pages.api_token_revoke_view,
        name="api_token_revoke",
    ),
    path("api-tokens/webhooks/new/", api_pages.webhook_new, name="webhook_new"),
    path(
        "api-tokens/webhooks/<int:webhook_id>/delete/",
        api_pages.webhook_delete,
        name="webhook_delete",
    ),
]
