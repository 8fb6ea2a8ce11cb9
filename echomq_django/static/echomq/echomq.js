/* EchoMQ admin: the auto-refresh toggle.
 *
 * When on (remembered per browser), the page's live region ([data-emq-live]) is
 * fetched again every few seconds and swapped in place, so the header, the
 * search box and the scroll position stay put. No framework, no CDN.
 */
"use strict";
(function () {
    const KEY = "echomq.autorefresh";
    const PERIOD_MS = 5000;
    let timer = null;

    function live() {
        return document.querySelector("[data-emq-live]");
    }

    async function refresh() {
        const region = live();
        if (!region || document.hidden) {
            return;
        }
        region.classList.add("emq-refreshing");
        try {
            const response = await fetch(window.location.href, {
                credentials: "same-origin",
                headers: {"X-Requested-With": "XMLHttpRequest"},
            });
            if (!response.ok || response.redirected) {
                return; // logged out or server gone: keep what is shown
            }
            const page = new DOMParser().parseFromString(await response.text(), "text/html");
            const fresh = page.querySelector("[data-emq-live]");
            if (fresh) {
                region.replaceWith(fresh);
            }
        } catch (error) {
            // offline for a moment: try again at the next tick
        } finally {
            region.classList.remove("emq-refreshing");
        }
    }

    function set(on) {
        window.clearInterval(timer);
        timer = on ? window.setInterval(refresh, PERIOD_MS) : null;
        try {
            window.localStorage.setItem(KEY, on ? "1" : "0");
        } catch (error) {
            // storage disabled: the toggle still works for this page
        }
    }

    document.addEventListener("DOMContentLoaded", function () {
        const toggle = document.querySelector("[data-emq-refresh]");
        if (!toggle || !live()) {
            return;
        }
        let saved = null;
        try {
            saved = window.localStorage.getItem(KEY);
        } catch (error) {
            saved = null;
        }
        toggle.checked = saved === "1";
        set(toggle.checked);
        toggle.addEventListener("change", function () {
            set(toggle.checked);
        });
    });
})();
