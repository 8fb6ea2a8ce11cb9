from django import forms


class WelcomeForm(forms.Form):
    """A sign-up-like form: its view enqueues the welcome mail task."""

    email = forms.EmailField(label="E-mail address")
