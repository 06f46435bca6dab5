from django.urls import path

from chats.pages.consumer import ChatConsumer

websocket_urlpatterns = [
    path("ws/chats/<int:chat_id>/", ChatConsumer.as_asgi()),
]
