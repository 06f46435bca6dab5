from django.urls import path

from chats.watch import views

urlpatterns = [
    path("chats/<int:chat_id>/turns/<int:turn_id>/watch/", views.watch_new, name="watch_new"),
    path("changes/", views.watch_changes, name="watch_changes"),
    path("changes/<int:watch_id>/pause/", views.watch_pause_view, name="watch_pause"),
    path("changes/<int:watch_id>/resume/", views.watch_resume_view, name="watch_resume"),
    path("changes/<int:watch_id>/delete/", views.watch_delete_view, name="watch_delete"),
]
