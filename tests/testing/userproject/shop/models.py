from django.db import models


class Order(models.Model):
    email = models.CharField(max_length=100)
    receipt_sent = models.BooleanField(default=False)
    notified = models.BooleanField(default=False)
    archived = models.BooleanField(default=False)
    charge_tries = models.IntegerField(default=0)
