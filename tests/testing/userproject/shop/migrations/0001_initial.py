from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("email", models.CharField(max_length=100)),
                ("receipt_sent", models.BooleanField(default=False)),
                ("notified", models.BooleanField(default=False)),
                ("archived", models.BooleanField(default=False)),
                ("charge_tries", models.IntegerField(default=0)),
            ],
        )
    ]
