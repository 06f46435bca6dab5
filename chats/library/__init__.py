"""The chat library: search past chats, organise them, share and export them."""
