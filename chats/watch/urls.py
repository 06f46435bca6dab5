from django.urls import include, path

from chats.watch import views

# What the "Changes" page's buttons do to one watch, below changes/<watch_id>/.
watch_actions = [
    path("pause/", views.watch_action, {"action": "pause"}, name="watch_pause"),
    path("resume/", views.watch_action, {"action": "resume"}, name="watch_resume"),
    path("delete/", views.watch_action, {"action": "delete"}, name="watch_delete"),
    path("email/", views.watch_email, name="watch_email"),
]

urlpatterns = [
    path("chats/<int:chat_id>/turns/<int:turn_id>/watch/", views.watch_new, name="watch_new"),
    path("changes/", views.watch_changes, name="watch_changes"),
    path("changes/<int:watch_id>/", include(watch_actions)),
]
